"""``care bench report``: the repository's generated sections are up to date; a section edited by hand makes
``--check`` exit 1 naming its document, and ``care bench report`` restores it byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer
from typer.testing import CliRunner

import care.bench.cli as bench_cli
from care.bench.reports.paths import RESULTS, ROOT
from care.bench.reports.sections import DOCUMENTS


def _app() -> typer.Typer:
    app = typer.Typer()
    bench_cli.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps typer in multi-command mode
        pass

    return app


def _copy_documents(root: Path) -> None:
    (root / "docs").mkdir()
    for name in DOCUMENTS:
        shutil.copyfile(ROOT / name, root / name)


def test_check_passes_on_the_repository():
    done = CliRunner().invoke(_app(), ["bench", "report", "--check"])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "up to date"


def test_check_names_an_edited_document_and_report_restores_it(tmp_path):
    _copy_documents(tmp_path)
    path = tmp_path / "docs" / "results.md"
    original = path.read_text(encoding="utf-8")
    start = original.index("<!-- results:results-index -->")
    end = original.index("<!-- /results:results-index -->")
    path.write_text(original[:start] + original[start:end].replace("|", "| edited", 1) + original[end:],
                    encoding="utf-8")
    options = ["--root", str(tmp_path), "--results", str(RESULTS)]
    done = CliRunner().invoke(_app(), ["bench", "report", "--check", *options])
    assert done.exit_code == 1
    assert "out of date: docs/results.md" in done.output
    done = CliRunner().invoke(_app(), ["bench", "report", *options])
    assert done.exit_code == 0 and "rewritten: docs/results.md" in done.output
    assert path.read_text(encoding="utf-8") == original
    assert CliRunner().invoke(_app(), ["bench", "report", "--check", *options]).exit_code == 0
