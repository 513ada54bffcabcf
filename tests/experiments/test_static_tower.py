"""``care.experiments.static_tower`` (``benchmarks/static_tower_test.py``): the static tower's test score per seed
against symmetric large's of the same seed, the ratio of means, the target on every seed, and the screen's choice
named by its record."""

from __future__ import annotations

import json

import pytest

from care.bench.selection import VALIDATION, Selection
from care.config import ConfigError
from care.experiments.static_tower import (
    CONFIGS,
    REFERENCE,
    SCREEN_SUFFIX,
    reference_scores,
    screen_selections,
    static_label,
    summarise,
)
from care.pipeline.config import load_run_config

TASK = "kuake_qtr_search"
LABEL = static_label("kuake_qtr")
REFERENCE_ROW = {"per_seed": [0.90, 0.92, 0.95], "seeds": [0, 1, 2], "mean": 0.9233}


def _run(seed: int, static: float) -> dict:
    return {"main_task": TASK, "step_seconds": {"train_care": 10.0}, "stage_train_seconds": {}, "commit": f"c{seed}",
            "rows": [{"model": LABEL, "scores": {TASK: static}}]}


def test_each_seed_is_divided_by_its_own_symmetric_large_and_the_target_needs_every_seed() -> None:
    record = summarise("kuake_qtr", {0: _run(0, 0.855), 1: _run(1, 0.874)}, REFERENCE_ROW)
    targets = record.extra["targets"]
    assert targets[f"{LABEL} / {REFERENCE} per seed"] == {"0": 0.95, "1": 0.95}
    assert targets[f"{LABEL} / {REFERENCE} (ratio of means)"] == pytest.approx(round((0.855 + 0.874) / 1.82, 4))
    assert targets[f"every seed >= 90% of {REFERENCE}"] is True
    assert record.scores[f"{REFERENCE} (transfer record)"]["seeds"] == [0, 1]  # seed 2 was not run here
    assert record.config["split"] == "test" and record.name == "kuake_qtr_test"
    short = summarise("kuake_qtr", {0: _run(0, 0.855), 1: _run(1, 0.80)}, REFERENCE_ROW)
    assert short.extra["targets"][f"every seed >= 90% of {REFERENCE}"] is False


def test_the_screens_choice_is_named_by_its_record_and_a_missing_reference_fails_by_name(tmp_path) -> None:
    assert screen_selections("kuake_qtr", tmp_path) == []
    folder = tmp_path / "static_tower"
    folder.mkdir()
    chosen = Selection("alignment text", VALIDATION, "a", {"a": 0.8, "b": 0.7})
    (folder / f"kuake_qtr{SCREEN_SUFFIX}.json").write_text(json.dumps({"extra": {"selection": [chosen.to_dict()]}}),
                                                           encoding="utf-8")
    [kept] = screen_selections("kuake_qtr", tmp_path)
    assert kept["record"] == f"static_tower/kuake_qtr{SCREEN_SUFFIX}" and kept["chosen"] == "a"
    with pytest.raises(ConfigError, match="bench_transfer"):
        reference_scores("kuake_qtr", tmp_path)


@pytest.mark.parametrize("dataset", sorted(CONFIGS))
def test_the_static_run_configs_train_stage1_only_on_a_static_query_tower(dataset) -> None:
    config = load_run_config(CONFIGS[dataset])
    assert config.models.query == "e5?layers=0" and config.models.document == "e5"
    assert config.recipes.care.stages == ["stage1"] and "train_care" in config.steps
