"""care.experiments.vocab_pruning: the report rebuilt from its committed record is the committed report (the
driver's logic moved into the package unchanged), tower labels, and a cached pruned e5 cut to other files refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from care.bench.latency import LatencyReport
from care.bench.record import BenchmarkRecord
from care.errors import CareError
from care.experiments.vocab_pruning import FULL, PRUNED, label, markdown, pruned_e5

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "benchmarks" / "results" / "frontier" / "vocab_pruning.json"


def test_the_report_rebuilt_from_the_record_is_the_committed_one():
    record = BenchmarkRecord.from_dict(json.loads(RECORD.read_text(encoding="utf-8")))
    committed = RECORD.with_suffix(".md").read_text(encoding="utf-8")
    test_queries = int(committed.split("the agreement columns encode the ")[1].split(" ")[0].replace(",", ""))
    report = LatencyReport.from_dict(record.latencies["report"])
    lines = markdown(record, report, test_queries, str(RECORD.relative_to(ROOT)))
    assert "\n".join(lines) + "\n" == committed


def test_labels_name_depth_width_and_vocabulary():
    assert label((FULL, 12, None)) == "12 layers, full vocabulary"
    assert label((PRUNED, 1, 768)) == "1 layers, FFN 768, dev-set vocabulary"


def test_a_cached_cut_made_from_other_files_is_refused(tmp_path):
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    for name in ("corpus.jsonl", "train.jsonl"):
        (data / name).write_text("", encoding="utf-8")
    cached = work / "e5-vocab-L12"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}", encoding="utf-8")
    (cached / "vocab_files.json").write_text(json.dumps(["corpus.jsonl"]), encoding="utf-8")
    with pytest.raises(CareError, match="other files"):
        pruned_e5(data, work)
