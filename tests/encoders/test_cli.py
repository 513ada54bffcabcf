"""``care inspect-model`` through the real typer app."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from care.encoders.cli import parse_option_flags, register
from care.errors import CareError


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    application = typer.Typer()
    register(application)

    @application.command("noop")
    def _noop() -> None:  # a second command keeps typer in multi-command mode
        pass

    return application


def test_bm25_scores_table(app):
    result = CliRunner().invoke(
        app,
        ["inspect-model", "bm25", "-O", "k1=1.2", "-q", "高血压吃什么药", "-d", "高血压患者需要服用降压药", "-d", "足球比赛很精彩"],
    )
    assert result.exit_code == 0, result.output
    assert "BM25Retriever" in result.output and "fingerprint:" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| 高血压"))
    first, second = (float(cell) for cell in row.strip("|").split("|")[1:])
    assert first > 0 and second == 0


def test_dense_model_reports_width(app, tiny_bert):
    result = CliRunner().invoke(app, ["inspect-model", str(tiny_bert), "--option", "pooling=cls", "-q", "头痛", "-d", "头痛", "-d", "感冒"])
    assert result.exit_code == 0, result.output
    assert "dim:         32" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| 头痛"))
    assert len(row.strip("|").split("|")) == 3


def test_bad_option_flag():
    with pytest.raises(CareError, match="key=value"):
        parse_option_flags(["pooling"])
    assert parse_option_flags(["instruction_template=Q: {query}"]) == {"instruction_template": "Q: {query}"}
