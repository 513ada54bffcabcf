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
    chosen_row,
    dev_set,
    reference_scores,
    screen_selections,
    static_label,
    static_labels,
    summarise,
)
from care.experiments.transfer import row_scores
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
def test_the_static_run_configs_train_a_static_query_tower_against_a_frozen_document_tower(dataset) -> None:
    config = load_run_config(CONFIGS[dataset])
    care = config.recipes.care
    assert config.models.query == "e5?layers=0" and config.models.document == "e5"
    assert "stage1" in care.stages and set(care.stages) <= {"init_document", "stage1", "stage2"}
    assert "train_care" in config.steps
    if "stage2" in care.stages:  # trained as the query side's SFT: the document tower (and so the index) stays e5's
        assert care.overrides[-1] == "stage2:stage=stage1_sft"
        assert config.validation.enabled  # the reported row is chosen there
    rows = static_labels(dataset)
    assert rows == [care.labels[stage] for stage in care.stages if stage != "init_document"]
    assert ("init_document" in care.stages) == (care.labels.get("init_document") is not None
                                                and care.labels["init_document"] not in rows)


def test_a_variant_reads_its_dev_sets_reference_and_screen(tmp_path) -> None:
    folder = tmp_path / "transfer"
    folder.mkdir()
    (folder / "toyhom.json").write_text(json.dumps({"scores": {REFERENCE: REFERENCE_ROW}}), encoding="utf-8")
    assert reference_scores("toyhom_large", tmp_path) == REFERENCE_ROW
    assert dev_set("toyhom_large") == "toyhom" and dev_set("kuake_qtr") == "kuake_qtr"
    runs = {0: {"main_task": "toyhom_neike_sample", "rows": [
        {"model": "symmetric large (this run)", "scores": {"toyhom_neike_sample": 0.29}},
        {"model": static_label("toyhom_large"), "scores": {"toyhom_neike_sample": 0.27}}]}}
    record = summarise("toyhom_large", runs, REFERENCE_ROW)
    assert record.name == "toyhom_large_test" and record.extra["reported_row"] == static_label("toyhom_large")
    assert "transfer/toyhom.json" in record.config["reference"]


def _rows(stage1: float, sft: float, stage1_validation: float, sft_validation: float) -> list[dict]:
    first, second = static_labels("toyhom")
    return [{"model": first, "scores": {"toyhom_neike_sample": stage1, "validation": stage1_validation}},
            {"model": second, "scores": {"toyhom_neike_sample": sft, "validation": sft_validation}}]


def test_the_reported_row_is_the_one_validation_ranks_first_not_the_one_test_does() -> None:
    first, second = static_labels("toyhom")
    reference = {"per_seed": [0.30, 0.30], "seeds": [0, 1], "mean": 0.30}
    runs = {seed: {"main_task": "toyhom_neike_sample", "rows": _rows(0.27, 0.26, 0.33, 0.35)} for seed in (0, 1)}
    record = summarise("toyhom", runs, reference)
    assert record.extra["reported_row"] == second  # better on validation, worse on test
    assert record.extra["targets"][f"{second} / {REFERENCE} per seed"] == {"0": 0.8667, "1": 0.8667}
    [choice] = record.extra["selection"]
    assert choice["selected_on"] == VALIDATION and choice["chosen"] == second
    assert choice["candidates"] == {first: 0.33, second: 0.35}
    assert record.scores[first]["mean"] == pytest.approx(0.27)  # the other row is kept, not hidden
    tie = {0: {"main_task": "toyhom_neike_sample", "rows": _rows(0.27, 0.29, 0.33, 0.33)}}
    assert chosen_row([first, second], row_scores(tie))[0] == first  # a tie goes to the row listed first
    unscored = {0: {"main_task": "toyhom_neike_sample",
                    "rows": [{"model": first, "scores": {"toyhom_neike_sample": 0.27}}]}}
    with pytest.raises(ConfigError, match="validation"):
        chosen_row([first, second], row_scores(unscored))
