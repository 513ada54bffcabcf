"""``care.train.recipes.tiny_sweep``: the seeds' scores averaged, the table, and the choice made on validation."""

from __future__ import annotations

import pytest

from care.bench.selection import VALIDATION
from care.train.recipes.tiny_sweep import EPOCHS, REFERENCE_ROW, choice, markdown, split_summary, summarise


def scores() -> dict[str, dict[str, float]]:
    return {REFERENCE_ROW: {"0": 0.5, "1": 0.7}, "recipe": {"1": 0.4, "0": 0.2}, "doclr": {"0": 0.35}}


def test_rows_are_means_over_the_seeds_in_seed_order():
    rows = summarise(scores())
    assert rows["recipe"] == {"seeds": [0, 1], "ndcg_at_10": [0.2, 0.4], "mean": pytest.approx(0.3)}
    assert rows["doclr"]["seeds"] == [0] and rows[REFERENCE_ROW]["mean"] == pytest.approx(0.6)


def test_the_choice_never_picks_the_reference_row_and_is_made_on_validation():
    picked = choice(summarise(scores()))
    assert picked.chosen == "doclr" and picked.selected_on == VALIDATION
    assert REFERENCE_ROW not in picked.candidates and picked.candidates["recipe"] == 0.3


def test_the_table_divides_by_the_reference_row():
    report = {"validation": {"held_out": 24, "training_rows": 216}}
    split = split_summary(report)
    assert split["validation_queries"] == 24 and split["training_rows"] == 216 and split["epochs"] == EPOCHS
    lines = markdown(summarise(scores()), split, "benchmarks.tune_care_tiny")
    assert "24 held-out queries" in lines[2] and "python -m benchmarks.tune_care_tiny --help" in lines[2]
    assert "| recipe | 0.3000 | 0, 1 | 0.2000, 0.4000 | 0.500 |" in lines
