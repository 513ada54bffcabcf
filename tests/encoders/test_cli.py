"""``care model inspect`` (and its old name, ``care inspect-model``) through the real typer app."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from care.cli import app as care_app
from care.encoders.cli import parse_option_flags, table_cell
from care.errors import CareError

INSPECT = ["model", "inspect"]


@pytest.fixture(scope="module")
def app():
    return care_app


def test_bm25_scores_table(app):
    result = CliRunner().invoke(
        app,
        [*INSPECT, "bm25", "-O", "k1=1.2", "-q", "高血压吃什么药", "-d", "高血压患者需要服用降压药", "-d", "足球比赛很精彩"],
    )
    assert result.exit_code == 0, result.output
    assert "BM25Retriever" in result.output and "fingerprint:" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| 高血压"))
    first, second = (float(cell) for cell in row.strip("|").split("|")[1:])
    assert first > 0 and second == 0


def test_dense_model_reports_width(app, tiny_bert):
    result = CliRunner().invoke(app, [*INSPECT, str(tiny_bert), "--option", "pooling=cls", "-q", "头痛", "-d", "头痛", "-d", "感冒"])
    assert result.exit_code == 0, result.output
    assert "dim:         32" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| 头痛"))
    assert len(row.strip("|").split("|")) == 3


def test_the_old_name_still_runs_hidden_and_says_where_it_moved(app, caplog):
    with caplog.at_level(logging.WARNING, logger="care.encoders.cli"):
        old = CliRunner().invoke(app, ["inspect-model", "bm25:char", "-q", "头痛", "-d", "头痛", "-d", "感冒"])
    new = CliRunner().invoke(app, [*INSPECT, "bm25:char", "-q", "头痛", "-d", "头痛", "-d", "感冒"])
    assert old.exit_code == 0 and old.output == new.output and "| 头痛 |" in new.output
    assert any("moved to `care model inspect`" in r.getMessage() for r in caplog.records)
    top = CliRunner().invoke(app, ["--help"]).output
    assert "inspect-model" not in top and "inspect" in CliRunner().invoke(app, ["model", "--help"]).output


def test_bad_option_flag():
    with pytest.raises(CareError, match="key=value"):
        parse_option_flags(["pooling"])
    assert parse_option_flags(["instruction_template=Q: {query}"]) == {"instruction_template": "Q: {query}"}


@pytest.mark.parametrize("flags", [["-q", "头痛"], ["-d", "头痛可以吃布洛芬"]])
def test_a_query_without_documents_is_refused(app, flags):
    """`-q` without `-d` (or the reverse) printed the model and silently no score table."""
    result = CliRunner().invoke(app, [*INSPECT, "bm25", *flags])
    assert isinstance(result.exception, CareError) and "to score against" in str(result.exception)


def test_a_query_with_a_pipe_or_line_break_keeps_its_table_row(app):
    result = CliRunner().invoke(app, [*INSPECT, "bm25", "-q", "头痛|发热\n三天", "-q", "！？。", "-d", "头痛", "-d", "的了吗呢"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| ") and "query" not in line]
    assert rows[0].startswith("| 头痛\\|发热 三天 | ") and rows[1].startswith("| ！？。 | ")
    assert all(len(row.replace("\\|", "").strip("|").split("|")) == 3 for row in rows)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_table_cell_is_one_cell_on_one_line(text):
    cell = table_cell(text)
    assert "\n" not in cell and "\r" not in cell and "|" not in cell.replace("\\|", "")
