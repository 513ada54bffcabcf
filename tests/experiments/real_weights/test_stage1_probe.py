"""``care.experiments.real_weights.stage1_probe`` (``benchmarks/bench_stage1_probe.py``) chooses Stage I settings, so
it scores validation; asked for test it refuses (before anything loads) unless given ``--select-on-test``, and its
choice is kept in the selection protocol."""

from __future__ import annotations

import pytest

from care.errors import CareError
from care.experiments.real_weights.stage1_probe import build_parser, probe_selection, run


def test_probing_on_test_is_refused_without_the_flag():
    args = build_parser().parse_args(["--probe", "preset=", "--split", "test"])
    with pytest.raises(CareError, match="bench_stage1_probe --split: .*--select-on-test"):
        run(args)


def test_the_probes_choice_names_every_probe_and_its_split():
    choice = probe_selection({"lr 2e-4": {"ndcg_at_10": 0.22}, "lr 2.4e-3": {"ndcg_at_10": 0.27}}, "validation")
    assert (choice.selected_on, choice.chosen) == ("validation", "lr 2.4e-3")
    assert choice.candidates == {"lr 2e-4": 0.22, "lr 2.4e-3": 0.27} and choice.rows == ["lr 2e-4", "lr 2.4e-3"]
