"""The quality-vs-speed figure places a model on the speed axis only when its latency means something."""

from __future__ import annotations

import pytest

from care.bench.figure import QualityPoint, quality_speed_figure, speed_of
from care.bench.latency import LatencyReport, LatencySettings, ModelLatency, SelfCheck


def _timed(p50: float, overhead: bool) -> ModelLatency:
    return ModelLatency(p10_ms=p50 * 0.9, p50_ms=p50, p90_ms=p50 * 1.2, ci_low_ms=p50 * 0.95, ci_high_ms=p50 * 1.05,
                        calls=60, stable=True, overhead_dominated=overhead)


def _report(ratio: float) -> LatencyReport:
    return LatencyReport(models={"e5": _timed(10.0, False), "student": _timed(2.0, False), "tiny": _timed(1.0, True)},
                         self_check=SelfCheck("student", ratio, 0.10), settings=LatencySettings(), queries=20)


def test_speed_only_for_trusted_models_that_are_not_overhead_dominated():
    trusted = _report(1.03)
    assert speed_of(trusted, "student") == pytest.approx(500.0) and speed_of(trusted, "e5") == pytest.approx(100.0)
    assert speed_of(trusted, "tiny") is None  # overhead-dominated
    assert speed_of(trusted, "absent") is None and speed_of(None, "e5") is None
    assert speed_of(_report(1.4), "student") is None  # the self-check failed: no model gets a speed


def test_figure_keeps_incomparable_models_off_the_speed_axis(tmp_path):
    pytest.importorskip("matplotlib")
    report = _report(1.03)
    points = [QualityPoint(label, score, speed_of(report, label)) for label, score in
              (("e5", 0.26), ("student", 0.24), ("tiny", 0.05))]
    png = quality_speed_figure(points, tmp_path / "f.png", speed_lines={"doc-qwen3-4b": 0.2})
    assert png.is_file() and png.stat().st_size > 0
    only_strip = quality_speed_figure([QualityPoint("tiny", 0.05, None)], tmp_path / "g.png")
    assert only_strip.is_file()
