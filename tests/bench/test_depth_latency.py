"""The latency curve of a model's depth cuts: every depth 1..L timed side by side, cached under the model's
fingerprint and the engine (a rerun cuts and times nothing), scratch cuts removed, an untrusted curve not cached."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import count

import pytest

from care.bench import depth_latency
from care.bench.depth_latency import (
    MEASURE_ATTEMPTS,
    ONNX_INT8,
    PYTORCH,
    DepthLatency,
    cache_path,
    measure_depth_latency,
)
from care.bench.latency import LatencySettings
from care.errors import CareError

QUICK = LatencySettings(warmup_calls=1, min_calls=2, max_calls=2, overhead_calls=1)
QUERIES = ["高血压吃什么药", "糖尿病饮食"]


@pytest.fixture(scope="module")
def three_layers(tmp_path_factory):
    """A random-init 3-layer tiny BERT (the shape matters here, not the weights)."""
    from care.models.presets import TINY_BERT, make_tiny_models

    query, _ = make_tiny_models(QUERIES + ["感冒发烧多喝水", "胃痛可能是胃炎引起的"], tmp_path_factory.mktemp("tiny"),
                                query_shape=replace(TINY_BERT, num_hidden_layers=3))
    return query


def _clock():
    """Every call takes 1 ms: the self-check passes and every depth times the same."""
    ticks = count()
    return lambda: next(ticks) * 0.0005


def test_every_depth_timed_once_then_cached(three_layers, tmp_path, monkeypatch) -> None:
    curve = measure_depth_latency(three_layers, QUERIES, tmp_path, engine=PYTORCH, settings=QUICK, clock=_clock())
    assert (curve.layers, sorted(curve.median_ms), curve.trusted, curve.queries) == (3, [1, 2, 3], True, 2)
    assert curve.speedups() == pytest.approx({3: 1.0, 2: 1.0, 1: 1.0}) and "PyTorch" in curve.engine_description
    target = cache_path(tmp_path, three_layers, PYTORCH)
    assert target.name == f"{curve.fingerprint}-pytorch.json" and target.is_file()
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # the scratch cuts are gone
    assert DepthLatency.from_dict(json.loads(target.read_text(encoding="utf-8"))) == curve

    def no_cut(*args, **kwargs):
        raise AssertionError("a cached curve was measured again")

    monkeypatch.setattr("care.models.prune.prune_layers", no_cut)
    assert measure_depth_latency(three_layers, QUERIES, tmp_path, engine=PYTORCH) == curve
    assert not cache_path(tmp_path, three_layers, ONNX_INT8).is_file()  # another engine is another entry


def test_an_untrusted_curve_is_measured_again_and_not_cached(three_layers, tmp_path, monkeypatch) -> None:
    calls = []

    def noisy(models, control, queries, engine, layers, fingerprint, settings, clock):
        calls.append(sorted(models))
        return DepthLatency(engine, layers, dict.fromkeys(models, 1.0), False, "LATENCY SELF-CHECK FAILED",
                            fingerprint, 2)

    monkeypatch.setattr(depth_latency, "_measure", noisy)
    curve = measure_depth_latency(three_layers, QUERIES, tmp_path, engine=PYTORCH, settings=QUICK)
    assert not curve.trusted and calls == [[1, 2, 3]] * MEASURE_ATTEMPTS
    assert list(tmp_path.iterdir()) == []


def test_the_onnx_int8_curve_times_exported_cuts(three_layers, tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    curve = measure_depth_latency(three_layers, QUERIES, tmp_path, engine=ONNX_INT8, settings=QUICK, clock=_clock())
    assert sorted(curve.median_ms) == [1, 2, 3] and curve.engine == ONNX_INT8
    assert "ONNX int8" in curve.engine_description
    assert [p.name for p in tmp_path.iterdir()] == [cache_path(tmp_path, three_layers, ONNX_INT8).name]


def test_back_to_back_timing_runs_blocks_and_is_its_own_cache_entry(three_layers, tmp_path, monkeypatch) -> None:
    seen = []

    def measured(models, control, queries, engine, layers, fingerprint, settings, clock):
        seen.append(settings.block_calls)
        return DepthLatency(engine, layers, {d: float(d) for d in models}, True, "self-check passed", fingerprint,
                            len(queries))

    monkeypatch.setattr(depth_latency, "_measure", measured)
    four = [*QUERIES, "感冒发烧多喝水", "胃痛可能是胃炎引起的"]
    warm = measure_depth_latency(three_layers, four, tmp_path, engine=PYTORCH, settings=QUICK, timing="back_to_back")
    cold = measure_depth_latency(three_layers, four, tmp_path, engine=PYTORCH, settings=QUICK)
    assert seen == [2, 1]  # half the queries in a row, then one at a time
    assert (warm.timing, cold.timing) == ("back_to_back", "interleaved")
    assert warm.engine_description.endswith(", back to back") and "back" not in cold.engine_description
    warm_file = cache_path(tmp_path, three_layers, PYTORCH, timing="back_to_back")
    assert warm_file.name.endswith("-pytorch-back_to_back.json") and warm_file.is_file()
    assert DepthLatency.from_dict(json.loads(warm_file.read_text(encoding="utf-8"))) == warm
    with pytest.raises(CareError, match="unknown latency timing 'warm'; choose from interleaved, back_to_back"):
        measure_depth_latency(three_layers, four, tmp_path, engine=PYTORCH, timing="warm")


def test_bad_requests_are_named(three_layers, tmp_path) -> None:
    with pytest.raises(CareError, match="unknown latency engine 'tpu'; choose from onnx-int8, pytorch"):
        measure_depth_latency(three_layers, QUERIES, tmp_path, engine="tpu")
    with pytest.raises(CareError, match="at least one query"):
        measure_depth_latency(three_layers, [], tmp_path, engine=PYTORCH)
