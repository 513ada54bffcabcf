"""Hostile queries through ``care bench`` (issue 40): every query is scored or refused with a named
reason before any encoding; refused ones are logged, listed in the result and left out of the metric."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import care.bench.cli as bench_cli
from care.bench.query_check import check_queries
from care.bench.registry import get_task
from care.bench.runner import evaluate
from care.data.rerank import RerankExample, write_rerank
from care.data.retrieval import Document, write_retrieval_folder
from care.data.sts import STSPair, write_sts
from care.errors import CareError

from ..hostile_text import HOSTILE_TEXTS, LONG_QUESTION_CHARS
from .fakes import HashEncoder

#: Query-side token limit of the tiny CARE model built for the dense run.
TINY_MAX_TOKENS = 64
INVISIBLE = "\u200b"
NO_VISIBLE = "query has no visible characters (only spaces or zero-width characters); send some text"

CORPUS = [Document("d1", "", "高血压怎么办"), Document("d2", "是怎么个..."), Document("d3", "血糖高", "糖尿病"),
          Document("d4", "！！！"), Document("d5", "what is this? 123")]
#: The reported queries, the invisible one included, each with one relevant document.
QUERIES = {f"q{i}": text for i, text in enumerate(HOSTILE_TEXTS)}
INVISIBLE_ID = next(q for q, text in QUERIES.items() if text == INVISIBLE)
LONG_ID = next(q for q, text in QUERIES.items() if len(text) == LONG_QUESTION_CHARS)


@pytest.fixture
def hostile_task(tmp_path: Path) -> Path:
    folder = tmp_path / "hostile"
    write_retrieval_folder(folder, CORPUS, QUERIES, {q: {"d1": 1} for q in QUERIES})
    return folder


@pytest.fixture
def bench_app() -> typer.Typer:
    app = typer.Typer()
    bench_cli.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps typer in multi-command mode
        pass

    return app


def _bench(app: typer.Typer, model: str, task: Path, out: Path) -> dict:
    result = CliRunner().invoke(app, ["bench", "-m", model, "-t", str(task), "-o", str(out), "--no-cache", "--no-progress"])
    assert result.exit_code == 0, (result.output, result.exception)
    (saved,) = out.glob("*.json")
    return json.loads(saved.read_text(encoding="utf-8"))


def _check_refusal(saved: dict, caplog: pytest.LogCaptureFixture) -> None:
    assert saved["refused_queries"] == {INVISIBLE_ID: NO_VISIBLE}
    assert saved["stats"]["n_queries"] == len(QUERIES) - 1 and saved["stats"]["n_refused_queries"] == 1
    assert f"hostile: query '{INVISIBLE_ID}' refused, left out of the metric: {NO_VISIBLE}" in caplog.text


def test_bm25_scores_every_visible_query_and_refuses_the_invisible_one(bench_app, hostile_task, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="care.bench.query_check"):
        saved = _bench(bench_app, "bm25", hostile_task, tmp_path / "out")
    _check_refusal(saved, caplog)
    # 9 scored queries, d1 (高血压怎么办 -> 高血压 怎么办) relevant to each: only the long question shares the
    # word 高血压; 是什么 keeps its stopwords but d1 has none, 高血壓 is traditional (one jieba word)
    assert saved["scores"]["recall_at_100"] == pytest.approx(1 / 9)


def test_a_tiny_dense_model_scores_and_counts_the_long_query(bench_app, hostile_task, tmp_path, caplog):
    from care.testing.tiny_model import make_tiny_care_model

    model = make_tiny_care_model(tmp_path / "tiny", max_seq_length=TINY_MAX_TOKENS)
    with caplog.at_level(logging.INFO, logger="care.bench.query_check"):
        saved = _bench(bench_app, str(model), hostile_task, tmp_path / "out")
    _check_refusal(saved, caplog)
    assert saved["stats"]["n_long_queries"] == 1
    assert f"1 of {len(QUERIES) - 1} queries are longer than" in caplog.text and "truncated" in caplog.text
    assert saved["scores"]["recall_at_100"] == 1.0  # 5 documents, every scored query ranks all of them


@pytest.mark.slow
def test_e5_scores_the_hostile_task(bench_app, hostile_task, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="care.bench.query_check"):
        saved = _bench(bench_app, "e5", hostile_task, tmp_path / "out")
    _check_refusal(saved, caplog)
    assert saved["stats"]["n_long_queries"] == 1 and "512-token windows" in caplog.text


def test_the_rule_names_each_problem():
    refused = check_queries({"ok": "高血壓", "zw": "\u200b\ufeff", "nul": "a\x00b", "sur": "头\ud800", "sym": "😀"}, "t")
    assert refused == {
        "zw": NO_VISIBLE,
        "nul": "query contains a NUL character (\\u0000) at character 1; remove control characters",
        "sur": "query contains a lone surrogate (U+D800) at character 1; that is not a valid Unicode character — "
               "send real text (a \\uD800-\\uDFFF escape must be half of a surrogate pair)",
    }
    with pytest.raises(CareError, match="every one of its 2 queries was refused"):
        check_queries({"a": " ", "b": INVISIBLE}, "t")


def test_rerank_and_sts_leave_refused_queries_out(tmp_path):
    rerank = tmp_path / "rerank-task"
    write_rerank(rerank / "rerank.jsonl", [
        RerankExample("高血压吃什么药", ("高血压患者应该按时服药",), ("感冒发烧多喝水",)),
        RerankExample(INVISIBLE, ("感冒发烧多喝水",), ("高血压患者应该按时服药",)),  # would score 0 if counted
    ])
    encoder = HashEncoder()
    result = evaluate(encoder, get_task(rerank))
    assert result.refused_queries == {"q1": NO_VISIBLE} and result.stats["n_queries"] == 1
    assert result.scores["map_at_10"] == 1.0 and encoder.calls["query"] == 1

    sts = tmp_path / "sts-task"
    write_sts(sts / "sts.jsonl", [STSPair("头痛", "头痛", 5.0), STSPair("发烧", "胃痛", 1.0),
                                  STSPair("失眠", INVISIBLE, 3.0), STSPair("咳嗽", "咳嗽了", 4.0)])
    result = evaluate(HashEncoder(), get_task(sts))
    assert result.refused_queries == {"pair2.sentence2": NO_VISIBLE} and result.stats["n_pairs"] == 3
