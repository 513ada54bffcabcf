"""``care.experiments.quantization``: the variant behind ``INT8_OPTIONS`` and the metric of emulated queries."""

from __future__ import annotations

import numpy as np
import pytest

from care.experiments.quantization import VARIANTS, chosen_variant, ndcg_on
from care.models.onnx_export import INT8_OPTIONS


def test_care_int8_options_are_one_of_the_compared_variants():
    chosen = chosen_variant()
    assert chosen in VARIANTS
    assert {k: v for k, v in VARIANTS[chosen].items() if k != "weight_type"} == {
        k: v for k, v in INT8_OPTIONS.items() if k != "weight_type"}


def test_ndcg_of_exact_search_finds_each_querys_own_document():
    docs = np.eye(4, dtype=np.float32)
    queries = docs[[2, 0]]
    qrels = {"a": {"d2": 1}, "b": {"d1": 1}}
    assert ndcg_on(queries, docs, ["d0", "d1", "d2", "d3"], ["a"], qrels) == pytest.approx(1.0)
    both = ndcg_on(queries, docs, ["d0", "d1", "d2", "d3"], ["a", "b"], qrels)
    assert 0.5 < both < 1.0  # b's own vector is d0: its relevant d1 ranks below it
