"""The shipped task folders load with the package's own loaders and declare the harness schema."""

from __future__ import annotations

import json

from care.data.io import iter_jsonl
from care.data.rerank import load_rerank
from care.data.retrieval import load_retrieval_folder
from care.data.sts import load_sts
from care.demo import demo_tasks_root, demo_train_file
from care.demo.tasks import (
    RERANK_INSTRUCTION,
    RERANK_TASK,
    RETRIEVAL_INSTRUCTION,
    RETRIEVAL_TASK,
    STS_INSTRUCTION,
    STS_TASK,
)

TASK_KEYS = {"name", "type", "description", "main_score", "instruction", "split", "relevance_threshold", "language"}


def _task(name: str) -> dict:
    return json.loads((demo_tasks_root() / name / "task.json").read_text(encoding="utf-8"))


def test_retrieval_folder_loads_with_graded_qrels() -> None:
    data = load_retrieval_folder(demo_tasks_root() / RETRIEVAL_TASK)
    assert len(data.queries) == sum(1 for _ in iter_jsonl(demo_tasks_root() / RETRIEVAL_TASK / "queries.jsonl"))
    assert {g for row in data.qrels.values() for g in row.values()} == {1, 2}
    meta = _task(RETRIEVAL_TASK)
    assert set(meta) == TASK_KEYS
    assert meta["type"] == "retrieval" and meta["main_score"] == "ndcg_at_10"
    assert meta["relevance_threshold"] == 2 and meta["instruction"] == RETRIEVAL_INSTRUCTION
    assert meta["split"] is None and meta["language"] == "zh"


def test_rerank_file_loads() -> None:
    rows = load_rerank(demo_tasks_root() / RERANK_TASK / "rerank.jsonl")
    assert len(rows) >= 150 and all(r.positive and r.negative for r in rows)
    meta = _task(RERANK_TASK)
    assert (meta["type"], meta["main_score"], meta["instruction"]) == ("rerank", "map_at_10", RERANK_INSTRUCTION)


def test_sts_file_loads() -> None:
    pairs = load_sts(demo_tasks_root() / STS_TASK / "sts.jsonl")
    assert {p.score for p in pairs} == {0.0, 1.0}
    meta = _task(STS_TASK)
    assert (meta["type"], meta["main_score"], meta["instruction"]) == ("sts", "pearson", STS_INSTRUCTION)


def test_train_file_is_flagembedding_format() -> None:
    rows = [obj for _, obj in iter_jsonl(demo_train_file())]
    assert rows
    for row in rows:
        assert set(row) == {"query", "pos", "neg"}
        assert isinstance(row["query"], str) and row["query"].strip()
        assert row["pos"] and all(isinstance(t, str) and t for t in row["pos"])
        assert len(row["neg"]) == 7 and not set(row["neg"]) & set(row["pos"])
