"""``care.experiments.transfer`` (``benchmarks/bench_transfer.py``): per-seed figures summarised over seeds, and a
record's seeds kept when another seed is run later (``--keep-recorded-seeds``), without the run folders."""

from __future__ import annotations

import json
import statistics

import pytest

from care.bench.record import BenchmarkRecord
from care.experiments.transfer import CARE, E5, SYM_LARGE, SYM_SMALL, TransferConfig, recorded_runs, summarise
from care.pipeline.sources import VALIDATION_TASK

TASK = "kuake_qtr_search"


def _run(seed: int, scores: dict[str, tuple[float, float]]) -> dict:
    """What run_seed returns for one seed: rows with a main-task and a validation score, the step times."""
    return {"main_task": TASK, "index": None, "validation": {}, "step_seconds": {"train_care": 10.0 + seed},
            "stage_train_seconds": {}, "overrides": [f"x={seed}"], "commit": f"c{seed}",
            "rows": [{"model": row, "scores": {TASK: test, VALIDATION_TASK: val}} for row, (test, val) in scores.items()]}


BASES = {E5: (0.85, 0.75), SYM_SMALL: (0.84, 0.74)}
RUNS = {0: _run(0, BASES | {SYM_LARGE: (0.90, 0.80), CARE: (0.88, 0.79), "CARE w/o Stage II": (0.85, 0.75)}),
        1: _run(1, BASES | {SYM_LARGE: (0.92, 0.82), CARE: (0.86, 0.77)})}
CONFIG = TransferConfig("kuake_qtr")


def test_rows_are_averaged_over_the_seeds_that_scored_them():
    record = summarise(CONFIG, RUNS)
    assert record.seeds == [0, 1]
    assert record.scores[CARE]["per_seed"] == [0.88, 0.86]
    assert record.scores[CARE]["mean"] == pytest.approx(0.87)
    assert record.scores[CARE]["std"] == pytest.approx(statistics.stdev([0.88, 0.86]))
    assert record.scores[f"{SYM_LARGE} (validation)"]["per_seed"] == [0.80, 0.82]
    # a row only seed 0 has is said to come from seed 0 alone
    assert record.scores["CARE w/o Stage II"] == {"per_seed": [0.85], "seeds": [0], "mean": 0.85, "std": 0.0}


def test_a_record_gives_back_its_seeds_and_a_later_seed_joins_them():
    written = json.loads(json.dumps(summarise(CONFIG, RUNS).to_dict() | {"commit": "old"}))
    record = BenchmarkRecord.from_dict(written)  # as read back from the file: seeds are string keys
    back = recorded_runs(record, "kuake_qtr")
    assert sorted(back) == [0, 1]
    assert {r["model"]: r["scores"] for r in back[0]["rows"]} == {r["model"]: r["scores"] for r in RUNS[0]["rows"]}
    assert back[1]["step_seconds"] == {"train_care": 11.0} and back[1]["overrides"] == ["x=1"]
    assert back[1]["commit"] == "c1"

    merged = summarise(CONFIG, back | {2: _run(2, BASES | {SYM_LARGE: (0.91, 0.81), CARE: (0.90, 0.80)})})
    assert merged.seeds == [0, 1, 2]
    assert merged.scores[CARE]["per_seed"] == [0.88, 0.86, 0.90]
    assert merged.extra["per_seed"][2]["commit"] == "c2"
    assert merged.extra["targets"]["CARE / symmetric large"] == pytest.approx(0.88 / 0.91)
    assert merged.extra["targets"]["CARE >= symmetric small + 0.02"] is True


def test_a_record_of_another_run_config_gives_nothing():
    record = summarise(CONFIG, RUNS)
    assert recorded_runs(record, "toyhom") == {}


def test_care_over_symmetric_large_is_given_per_seed_beside_the_ratio_of_means():
    targets = summarise(CONFIG, RUNS).extra["targets"]
    assert targets["CARE / symmetric large"] == pytest.approx(0.87 / 0.91)
    assert targets["CARE / symmetric large per seed"] == pytest.approx({"0": 0.88 / 0.90, "1": 0.86 / 0.92})


def test_a_budget_run_is_recorded_under_its_own_name_with_its_pick_chosen_on_speed():
    from care.bench.selection import read_selections

    choice = {"budget": 5.0, "depth": 1, "query_spec": "e5?layers=1", "layers": 12, "engine": "ONNX int8",
              "speedups": {"12": 1.0, "6": 1.8, "1": 6.4}, "median_ms": {}, "self_check": "", "rich_stage1": True,
              "settings": {"models.query": "e5?layers=1"}, "kept": []}
    runs = {seed: {**run, "query_budget": choice} for seed, run in RUNS.items()}
    kept = [{"setting": "e5 preset's Stage I", "selected_on": "test", "chosen": "x"},
            {"setting": "query tower depth (seed 0)", "selected_on": "speed", "chosen": "6"}]  # an old pick: made anew
    record = summarise(TransferConfig("kuake_qtr", [], 5.0), runs, kept)
    assert record.name == "kuake_qtr_speedup5"
    assert record.config["overrides"] == ["recipes.care.query_speedup=5"]
    assert record.extra["query_budget"]["0"]["depth"] == 1
    picks = read_selections(record.extra)
    assert [(s.setting, s.selected_on, s.chosen) for s in picks] == [
        ("e5 preset's Stage I", "test", "x"), ("query tower depth (seed 0)", "speed", "1"),
        ("query tower depth (seed 1)", "speed", "1")]
    assert picks[1].candidates == {"12": 1.0, "6": 1.8, "1": 6.4}


def test_the_config_round_trips_and_names_a_bad_field():
    from care.config import ConfigError

    config = TransferConfig("toyhom", ["recipes.care.max_train_examples=100"], 2.5)
    assert TransferConfig.from_dict(config.to_dict()) == config
    assert config.record_name == "toyhom_speedup2.5"
    assert config.run_overrides() == ["recipes.care.max_train_examples=100", ("recipes.care.query_speedup", 2.5)]
    assert TransferConfig("toyhom", [], 5.0).run_overrides() == [("recipes.care.query_speedup", 5)]  # as "5" reads
    with pytest.raises(ConfigError, match="field 'dataset': 'msmarco'; choose from kuake_qtr, toyhom"):
        TransferConfig.from_dict({"dataset": "msmarco"})
    with pytest.raises(ConfigError, match="field 'query_speedup'"):
        TransferConfig.from_dict({"query_speedup": 0})
