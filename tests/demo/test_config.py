"""DemoConfig validation and JSON round trip."""

from __future__ import annotations

import json

import pytest

from care.demo.config import DemoConfig
from care.errors import CareError


def test_round_trip_through_json() -> None:
    config = DemoConfig(seed=5, rerank_queries=100)
    assert DemoConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_unknown_keys_and_bad_values_are_named() -> None:
    with pytest.raises(CareError, match="unknown field 'docs'"):
        DemoConfig.from_dict({"docs": 3})
    with pytest.raises(CareError, match="query_prefix_prob must be a probability"):
        DemoConfig(query_prefix_prob=1.5)
    with pytest.raises(CareError, match="docs_per_cell_min"):
        DemoConfig(docs_per_cell_min=4, docs_per_cell_max=3)


def test_streams_differ_per_component_and_seed() -> None:
    assert DemoConfig(seed=1).stream("corpus") != DemoConfig(seed=1).stream("queries")
    assert DemoConfig(seed=1).stream("corpus") != DemoConfig(seed=2).stream("corpus")
