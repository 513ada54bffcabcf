"""care.experiments.vocab_pruning_trained: each committed report is the one rebuilt from its record (the driver's
page moved into the package unchanged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from care.bench.record import BenchmarkRecord
from care.experiments.vocab_pruning_trained import FULL, PRUNED, RECORD_PREFIX, markdown

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "benchmarks" / "results" / "frontier").glob(f"{RECORD_PREFIX}*.json"))


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_the_report_rebuilt_from_the_record_is_the_committed_one(path: Path) -> None:
    record = BenchmarkRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))
    lines = markdown(record, str(path.relative_to(ROOT)))
    assert "\n".join(lines) + "\n" == path.with_suffix(".md").read_text(encoding="utf-8")
    assert set(record.scores) == {FULL, PRUNED} and record.seeds == [0]


def test_there_is_a_record() -> None:
    assert RECORDS, "benchmarks/results/frontier/ lost its vocab_pruning_trained_* records"
