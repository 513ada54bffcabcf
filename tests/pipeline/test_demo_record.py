"""The main job's record shows the paper's point (issue 62): on ``benchmarks/results/demo_run/demo.json``, written by
``python -m benchmarks.bench_demo`` from a real ``care demo`` run, CARE scores at least symmetric small and e5
zero-shot, within a stated margin of symmetric large, its query side is faster than symmetric large's in the same
engine, and the index serves it. The figures are the record's, never typed here; a new record that breaks the order
fails this test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "demo_run" / "demo.json"
MAIN_TASK = "CMedTEB-Demo-Retrieval"
#: CARE keeps at least this share of symmetric large's retrieval nDCG@10 (the paper's claim, issue 62's target).
SHARE_OF_SYMMETRIC_LARGE = 0.95
#: CARE's query side at least this many times faster than symmetric large's, in the latency step's one engine.
MIN_SPEEDUP = 1.5
#: The shipped demo's rows, in the paper's order.
PAPER_ORDER = ["BM25", "e5 (zero-shot)", "symmetric small", "symmetric large", "CARE w/o Stage II", "CARE"]


@pytest.fixture(scope="module")
def record() -> dict:
    if not RECORD.is_file():
        pytest.skip(f"{RECORD} not written yet: python -m benchmarks.bench_demo")
    return json.loads(RECORD.read_text(encoding="utf-8"))


def _main(record: dict, row: str) -> float:
    return record["scores"][row][MAIN_TASK]


def test_the_rows_are_the_paper_s_in_its_order(record) -> None:
    assert list(record["scores"]) == PAPER_ORDER


def test_care_is_above_symmetric_small_and_e5_and_near_symmetric_large(record) -> None:
    care = _main(record, "CARE")
    assert care >= _main(record, "symmetric small")
    assert care >= _main(record, "e5 (zero-shot)")
    assert care >= SHARE_OF_SYMMETRIC_LARGE * _main(record, "symmetric large")


def test_care_s_query_side_is_faster_than_symmetric_large_s_in_one_engine(record) -> None:
    latency = record["extra"]["steps"]["latency"]["outputs"]
    assert latency["self_check_passed"] and latency["reference"] == "symmetric large"
    assert latency["engine"] == "onnx-int8"
    assert latency["speedups"]["CARE"] >= MIN_SPEEDUP
    for row in PAPER_ORDER[1:]:  # every dense row timed in that engine: none "not comparable"
        assert latency["speedups"].get(row) is not None, row


def test_the_index_serves_care(record) -> None:
    index = record["extra"]["steps"]["index"]["outputs"]
    assert index["label"] == "CARE"
    assert "CARE within" in index["chosen_by"] and "validation" in index["chosen_by"]
