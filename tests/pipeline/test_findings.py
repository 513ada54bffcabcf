"""The report's lead, on issue 63's numbers: CARE's share of symmetric large, its speed-up in the latency step's
engine, the rivals it is compared with, the model the index serves and why, the budget's curve and pick."""

from __future__ import annotations

from care.pipeline.findings import budget_line, findings_lines, index_line, quality_line

TASK = "beir"
ROWS = [{"model": "BM25", "scores": {TASK: 0.70}}, {"model": "e5 (zero-shot)", "scores": {TASK: 0.826}},
        {"model": "symmetric large", "scores": {TASK: 0.863}}, {"model": "CARE", "scores": {TASK: 0.858}}]
LATENCY = {"engine": "onnx-int8", "engine_description": "ONNX int8 (onnxruntime), 1 thread, batch 1",
           "reference": "symmetric large", "speedups": {"CARE": 5.12, "symmetric large": 1.0, "e5 (zero-shot)": 1.01}}
BUDGET = {"budget": 5.0, "depth": 1, "layers": 12, "query_spec": "e5?layers=1", "engine": "ONNX int8 (onnxruntime)",
          "speedups": {"12": 1.0, "6": 1.77, "1": 5.3}}
INDEX = {"label": "CARE", "chosen_by": "the best trained model on validation"}


def test_the_lead_on_the_issues_numbers():
    lines = findings_lines(ROWS, care="CARE", reference="symmetric large", task=TASK, metric="ndcg_at_10",
                           latency=LATENCY, budget=BUDGET, index=INDEX, rivals=["e5 (zero-shot)"])
    assert lines[1] == ""
    assert lines[0] == (
        "**What this run found.** CARE scores 0.8580 ndcg_at_10 on beir (test): 99.4 % of symmetric large (0.8630), "
        "its query side 5.12× faster than symmetric large's (ONNX int8 (onnxruntime), 1 thread, batch 1, timed side "
        "by side); above e5 (zero-shot) (0.8260). The index serves CARE: the best trained model on validation. "
        "The query-latency budget of 5× picked `e5?layers=1` (1 of 12 layers, 5.30× faster than the document model's "
        "query side), the deepest cut that fast; the depth curve it measured (ONNX int8 (onnxruntime)): 12: 1.00×, "
        "6: 1.77×, 1: 5.30×. Trained, CARE's query side timed 5.12× faster than symmetric large's here.")


def test_each_part_is_left_out_without_its_inputs():
    assert quality_line(ROWS, "CARE", "symmetric large", TASK, "ndcg_at_10", None) == (
        "CARE scores 0.8580 ndcg_at_10 on beir (test): 99.4 % of symmetric large (0.8630).")
    assert quality_line(ROWS, "CARE", "absent", TASK, "ndcg_at_10", LATENCY) is None
    assert quality_line(ROWS, "CARE", "symmetric large", TASK, "ndcg_at_10", LATENCY, ["BM25"]).endswith(
        "; above BM25 (0.7000).")
    assert index_line(None) is None
    assert index_line({**INDEX, "label": "symmetric large", "care_alternative": "CARE scores 0.85; serve it"}) == (
        "The index serves symmetric large: the best trained model on validation (CARE scores 0.85; serve it).")
    assert budget_line(None, "CARE", LATENCY) is None
    assert "Trained" not in budget_line(BUDGET, "CARE", None)
    assert findings_lines([], care=None, reference=None, task=TASK, metric="m", latency=None, budget=None,
                          index=None) == []
