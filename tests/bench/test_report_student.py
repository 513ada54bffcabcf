"""``care.bench.reports.student`` (``care bench report student``, ``bench_student --summarise-seeds``): the seeds'
summary of the e5-teacher student; ``care bench report transfer``: a transfer record's table from the record alone."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest

from care.bench.record import BenchmarkRecord, write_record
from care.bench.reports.paths import RESULTS
from care.bench.reports.student import E5, EXPERIMENT, FINAL, UNTRAINED, record_name, summarise, summary_markdown

from .test_report_cli import _app


def _seed(results, seed: int, final: float, e5_over: float | None, tag: str = "") -> None:
    """A seed's record: e5, the untrained cut and the student; e5's latency over the student (None: the seed's
    self-check failed)."""
    scores = {E5: {"ndcg_at_10": 0.30}, UNTRAINED: {"ndcg_at_10": 0.05}, FINAL: {"ndcg_at_10": final}}
    write_record(BenchmarkRecord(EXPERIMENT, record_name("toyhom", seed, tag), config={"dataset": "toyhom",
                                                                                         "threads": 1},
                                 seeds=[seed], scores=scores, latencies={E5: {"median_ms": 6.0}, FINAL: {"median_ms": 3.0}},
                                 extra={"e5_latency_over": {FINAL: e5_over}}), results)


def test_the_summary_averages_each_row_and_counts_only_trusted_speed_ratios(tmp_path):
    _seed(tmp_path, 0, 0.24, 2.0)
    _seed(tmp_path, 1, 0.26, None)  # its latency self-check failed: no ratio
    record = summarise("toyhom", [0, 1], tmp_path)
    assert record.name == "toyhom_seeds" and record.seeds == [0, 1]
    assert record.scores[FINAL]["ndcg_at_10"] == [0.24, 0.26]
    assert record.scores[FINAL]["ndcg_at_10_mean"] == pytest.approx(0.25)
    assert record.scores[FINAL]["ndcg_at_10_std"] == pytest.approx(statistics.stdev([0.24, 0.26]))
    assert record.latencies == {FINAL: {"e5_latency_over_this_mean": 2.0}}
    assert record.extra["runs"] == ["toyhom_seed0.json", "toyhom_seed1.json"]
    table = summary_markdown(record)
    assert f"| {FINAL} | 0.2500 |" in table and "| 83.3% | 2.00× |" in table
    assert "1 thread(s) per engine" in table


def test_a_tagged_recipe_is_summarised_on_its_own_and_a_missing_seed_is_named(tmp_path):
    _seed(tmp_path, 0, 0.10, 1.5, tag="static")
    _seed(tmp_path, 0, 0.24, 2.0)
    record = summarise("toyhom", [0], tmp_path, tag="static")
    assert record.name == "toyhom_static_seeds" and record.scores[FINAL]["ndcg_at_10"] == [0.10]
    with pytest.raises(SystemExit, match=r"no record student/toyhom_static_seed1.json: run the benchmark with --seed 1"):
        summarise("toyhom", [0, 1], tmp_path, tag="static")


def test_the_command_writes_the_summary_record_and_its_table(tmp_path):
    from typer.testing import CliRunner

    _seed(tmp_path, 0, 0.24, 2.0)
    _seed(tmp_path, 1, 0.26, 3.0)
    done = CliRunner().invoke(_app(), ["bench", "report", "student", "0", "1", "--results", str(tmp_path)])
    assert done.exit_code == 0, done.output
    written = json.loads((tmp_path / EXPERIMENT / "toyhom_seeds.json").read_text(encoding="utf-8"))
    assert written["scores"][FINAL]["ndcg_at_10"] == [0.24, 0.26]
    assert written["latencies"][FINAL]["e5_latency_over_this_mean"] == pytest.approx(2.5)
    assert "| 83.3% | 2.50× |" in (tmp_path / EXPERIMENT / "toyhom_seeds.md").read_text(encoding="utf-8")


def test_transfer_tables_are_rewritten_byte_for_byte_from_their_records(tmp_path):
    from typer.testing import CliRunner

    for name in ("kuake_qtr.json", "kuake_qtr.md", "kuake_qtr_without_stored_prompts.json"):
        shutil.copyfile(RESULTS / "transfer" / name, tmp_path / name)
    original = (tmp_path / "kuake_qtr.md").read_text(encoding="utf-8")
    (tmp_path / "kuake_qtr.md").write_text("stale\n", encoding="utf-8")
    done = CliRunner().invoke(_app(), ["bench", "report", "transfer", str(tmp_path / "kuake_qtr.json")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "kuake_qtr.md").read_text(encoding="utf-8") == original
    refused = CliRunner().invoke(_app(), ["bench", "report", "transfer",
                                          str(tmp_path / "kuake_qtr_without_stored_prompts.json")])
    assert refused.exit_code != 0 and "not a transfer summary" in str(refused.exception)
