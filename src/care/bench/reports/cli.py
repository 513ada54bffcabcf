"""``care bench report``: regenerate the experiments' tables from their records.

- ``care bench report``: rewrite the ``<!-- results:NAME -->`` sections of README.md and docs/*.md that are out
  of date (:mod:`care.bench.reports.sections`);
- ``care bench report --check``: only name the stale documents, exit 1 when there is one (what the tests run);
- ``--root`` / ``--results``: another checkout, or another results folder (a smoke run's);
- ``care bench report frontier`` / ``transfer``: rewrite one experiment's Markdown (and figure) from its record;
- ``care bench report student SEED ...``: summarise the student's seed records into its seeds' record and table.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

logger = logging.getLogger(__name__)

#: Exit status of ``--check`` when a document is out of date.
STALE_EXIT = 1


def report_main(*, check: bool = False, root: Path | None = None, results: Path | None = None) -> int:
    """Rewrite (or with ``check``, only list) the stale documents under ``root`` from the records under
    ``results`` (default: this checkout's); echoes what it did. Returns the exit status: :data:`STALE_EXIT` when
    ``check`` finds a stale document, else 0."""
    from care.bench.reports.paths import RESULTS, ROOT
    from care.bench.reports.sections import rewrite_documents, stale_documents

    root = ROOT if root is None else root
    results = (root / RESULTS.relative_to(ROOT)) if results is None else results
    stale = list(stale_documents(root, results)) if check else rewrite_documents(root, results)
    verb = "out of date" if check else "rewritten"
    typer.echo(f"{verb}: {', '.join(stale)}" if stale else "up to date")
    return STALE_EXIT if check and stale else 0


def report(
    ctx: typer.Context,
    check: bool = typer.Option(False, "--check", help="Only name the documents out of date with their records (exit 1)."),
    root: Path | None = typer.Option(None, "--root", help="Repository whose README.md and docs/*.md are generated (default: this checkout)."),
    results: Path | None = typer.Option(None, "--results", help="Records folder (default: ROOT/benchmarks/results)."),
) -> None:
    """Regenerate the result tables of README.md and docs/*.md from benchmarks/results/*/*.json."""
    if ctx.invoked_subcommand is not None:
        return
    status = report_main(check=check, root=root, results=results)
    if status:
        raise typer.Exit(status)


def frontier(
    record: Path = typer.Option(None, "--record", help="The frontier record (default: ROOT/benchmarks/results/frontier/test.json)."),
    no_figure: bool = typer.Option(False, "--no-figure", help="Write the .md only (no frontier.png; needs matplotlib)."),
) -> None:
    """Rewrite the frontier's test.md (and frontier.png) beside its JSON record, from the record alone."""
    import json

    from care.bench.record import BenchmarkRecord
    from care.bench.reports.frontier_report import FIGURE_NAME, figure, markdown
    from care.bench.reports.frontier_towers import EXPERIMENT
    from care.bench.reports.paths import RESULTS
    from care.data.io import atomic_write

    record = RESULTS / EXPERIMENT / "test.json" if record is None else record
    if not record.is_file():
        from care.errors import CareError

        raise CareError(f"--record {record}: no such file (python -m benchmarks.frontier writes it)")
    rec = BenchmarkRecord.from_dict(json.loads(record.read_text(encoding="utf-8")), str(record))
    with atomic_write(record.with_suffix(".md")) as fh:
        fh.write(markdown(rec))
    typer.echo(f"rewritten: {record.with_suffix('.md')}")
    if not no_figure:
        typer.echo(f"rewritten: {figure(rec, record.parent / FIGURE_NAME)}")


def transfer(
    records: list[Path] = typer.Argument(None, help="Transfer records (default: every ROOT/benchmarks/results/transfer/<dataset>.json with targets)."),
) -> None:
    """Rewrite each transfer record's .md beside it (its rows, issue 43's targets, the command), from the record alone."""
    from care.bench.reports.paths import RESULTS
    from care.bench.reports.transfer import EXPERIMENT, TARGETS_KEY, record_markdown
    from care.data.io import atomic_write

    paths = records or sorted((RESULTS / EXPERIMENT).glob("*.json"))
    for path in paths:
        rec = _read_record(path, "python -m benchmarks.bench_transfer writes it")
        if TARGETS_KEY not in rec.extra:
            if records:  # named, so it was meant to be a summary
                from care.errors import CareError

                raise CareError(f"{path}: not a transfer summary (no extra.{TARGETS_KEY}; a check record?)")
            continue
        with atomic_write(path.with_suffix(".md")) as fh:
            fh.write(record_markdown(rec))
        typer.echo(f"rewritten: {path.with_suffix('.md')}")


def student(
    seeds: list[int] = typer.Argument(..., help="The seeds whose records student/<dataset>[_<tag>]_seed<K>.json to summarise."),
    dataset: str = typer.Option("toyhom", "--dataset", help="The dev set the records name."),
    tag: str = typer.Option("", "--tag", help="Another recipe's records (<dataset>_<tag>_seed<K>)."),
    results: Path | None = typer.Option(None, "--results", help="Records folder (default: ROOT/benchmarks/results)."),
) -> None:
    """Summarise the e5 student's seed records into student/<dataset>[_<tag>]_seeds.json and its .md (mean ± std)."""
    from care.bench.record import write_record
    from care.bench.reports.paths import RESULTS
    from care.bench.reports.student import summarise, summary_markdown
    from care.data.io import atomic_write

    record = summarise(dataset, seeds, RESULTS if results is None else results, tag)
    path = write_record(record, RESULTS if results is None else results)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(summary_markdown(record))
    typer.echo(f"written: {path}, {path.with_suffix('.md')}")


def _read_record(path: Path, writer: str):
    """The record at ``path``; a missing file is refused naming what writes it."""
    import json

    from care.bench.record import BenchmarkRecord

    if not path.is_file():
        from care.errors import CareError

        raise CareError(f"{path}: no such record ({writer})")
    return BenchmarkRecord.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))


def register(bench_app: typer.Typer) -> None:
    """Add ``report`` (a group: its subcommands regenerate one experiment's report) to ``care bench``."""
    report_app = typer.Typer(help="Regenerate the experiments' tables and reports from their records.")
    report_app.callback(invoke_without_command=True)(report)
    report_app.command("frontier")(frontier)
    report_app.command("transfer")(transfer)
    report_app.command("student")(student)
    bench_app.add_typer(report_app, name="report")
