"""The generated ``real-weights-table`` and ``real-weights-gpu-table``: CARE on real weights
(``bench_real_weights.py --summarise``, records ``real_weights/test.json`` and ``real_weights/test_gpu.json``),
nDCG@10 per row beside its query tower's latency in ONNX fp32 / int8."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import read_records
from care.bench.reports.paths import RESULTS
from care.bench.reports.records import record
from care.bench.reports.rows import first
from care.bench.selection import TEST_FOOTNOTE, chosen_on_test, with_test_mark
from care.bench.tables import markdown_table

#: The real-weights table: (row, label in real_weights/test.json, query-tower layers, bold).
REAL_WEIGHTS_ROWS: tuple[tuple[str, str, int, bool], ...] = (
    ("e5 zero-shot (multilingual-e5-small, PyTorch)", "e5 zero-shot", 12, False),
    ("peer: e5 fine-tuned on both sides by sentence-transformers' trainer", "peer (sentence-transformers trainer)", 12, False),
    ("symmetric small: e5's 6-layer strided cut fine-tuned on both sides", "symmetric small", 6, False),
    ("symmetric large: e5's 12 layers fine-tuned on both sides (care train)", "symmetric large", 12, False),
    ("CARE w/o Stage I", "CARE w/o Stage I", 6, False),
    ("CARE w/o Stage II (Stage I only)", "CARE w/o Stage II", 6, False),
    ("**CARE** (6-layer query tower, 12-layer document tower)", "CARE", 6, True),
    ("CARE, query tower in ONNX int8", "CARE, ONNX int8", 6, False),
    ("CARE, Stage II on one mined hard negative per query (the `e5` preset's default, chosen on validation)",
     "CARE [mined1loose]", 6, False),
    ("symmetric large given the same mined Stage II epoch (like for like)", "symmetric large [mined1loose]", 12, False),
    ("symmetric small: e5's 4-layer cut (the depth trade-off)", "symmetric small (4 layers)", 4, False),
    ("CARE with a 4-layer query tower", "CARE (4 layers)", 4, False),
    ("symmetric small: e5's 3-layer cut", "symmetric small (3 layers)", 3, False),
    ("CARE with a 3-layer query tower", "CARE (3 layers)", 3, False),
    ("student vs frozen e5 documents", "student vs frozen e5", 6, False),
)
#: Where the student row comes from when real_weights/test.json has none: bench_student.py's seed summary
#: (its final row's label, by script version).
STUDENT_SUMMARY = ("student", "toyhom_seeds")
STUDENT_FINAL_LABELS = ("student (Stage I + fine-tune)", "after supervised fine-tune (query side only)")


def _query_latency(latency: dict, layers: int, engine: str) -> str | None:
    """``"p50 (speed-up×)"`` of a query tower of ``layers`` in ONNX ``engine`` from a real-weights summary's
    latencies (measured side by side with symmetric large's 12-layer query side), or None."""
    key = f"{layers} layers" + (" (symmetric large's query side)" if layers == 12 else "") + f", ONNX {engine}"
    lat = latency.get(key)
    if not lat:
        return None
    ratio = lat.get("large_over_this")
    return f"{lat['p50_ms']:.2f}" + (f" ({ratio:.1f}×)" if ratio and layers != 12 else "")


def real_weights_table(results: Path = RESULTS) -> str:
    """CARE on real weights (bench_real_weights.py --summarise): nDCG@10 per row and its query tower's
    latency in ONNX fp32 / int8 side by side with symmetric large's query side in the same engine."""
    rec = record("real_weights", "test", results)
    rows = []
    for label, key, layers, bold in REAL_WEIGHTS_ROWS:
        if key in rec.scores:
            r = rec.scores[key]
            value = f"{r['mean']:.3f}" + (f" ± {r['std']:.3f}" if len(r["per_seed"]) > 1 else "")
            if r.get("seeds") is not None and r["seeds"] != rec.seeds:  # a row some seeds have not reached yet
                value += f" (seed{'s' if len(r['seeds']) > 1 else ''} {', '.join(map(str, r['seeds']))})"
        elif key == "student vs frozen e5" and (summary := _student_summary(results)) is not None:
            value, seeds = summary
            label = f"{label} (`bench_student.py`, seeds {seeds})"
        else:
            continue
        engine = "int8" if "int8" in key else None
        value = with_test_mark(f"**{value}**" if bold else value, rec.extra, key)
        rows.append([label, value, str(layers),
                     _query_latency(rec.latencies, layers, "fp32") if engine is None else None,
                     _query_latency(rec.latencies, layers, "int8")])
    if chosen_on_test(rec.extra):
        rows.append([TEST_FOOTNOTE, "", "", "", ""])
    return markdown_table(["row", f"nDCG@10 (seeds {', '.join(map(str, rec.seeds))})", "query layers",
                           "query p50 ms, ONNX fp32", "query p50 ms, ONNX int8"], rows)


def real_weights_gpu_table(results: Path = RESULTS) -> str:
    """The real-weights table run on a GPU machine (``bench_real_weights.py --tag gpu``, then
    ``--summarise --tag gpu``): nDCG@10 per row and seed; the checks on the seeds both rows hold. Query
    latency is the CPU summary's (``test.json``, ``--summarise --latency`` on the development machine): it
    depends on the tower's shape, which is the same, not on its weights."""
    rec = record("real_weights", "test_gpu", results)
    latency = record("real_weights", "test", results).latencies
    rows = []
    for label, key, layers, bold in REAL_WEIGHTS_ROWS:
        if key not in rec.scores:
            continue
        r = rec.scores[key]
        value = f"{r['mean']:.4f}" + (f" ± {r['std']:.4f}" if len(r["per_seed"]) > 1 else f" (seed {r['seeds'][0]})")
        per_seed = ", ".join(f"{v:.4f}" for v in r["per_seed"])
        if r.get("seeds") is not None and r["seeds"] != rec.seeds:  # a row some seeds did not run
            per_seed += f" (seeds {', '.join(map(str, r['seeds']))})"
        rows.append([label, with_test_mark(f"**{value}**" if bold else value, rec.extra, key), per_seed, str(layers),
                     _query_latency(latency, layers, "fp32"), _query_latency(latency, layers, "int8")])
    checks = rec.extra.get("checks", {})
    rows += [[f"check: {name}", f"{value:.1%}" if "/" in name else f"{value:+.4f}", "", "", "", ""]
             for name, value in checks.items()]
    if chosen_on_test(rec.extra):
        rows.append([TEST_FOOTNOTE, "", "", "", "", ""])
    return markdown_table(["row", f"nDCG@10 (seeds {', '.join(map(str, rec.seeds))}, {', '.join(rec.config['devices'])})",
                           "per seed", "query layers", "query p50 ms, ONNX fp32 (2 CPU cores)",
                           "query p50 ms, ONNX int8 (2 CPU cores)"], rows)


def _student_summary(results: Path) -> tuple[str, str] | None:
    """``("mean ± std", "0, 1, 2")`` of the student's final row in its seed summary, or None."""
    records = read_records(results, STUDENT_SUMMARY[0])
    if STUDENT_SUMMARY[1] not in records:
        return None
    summary = records[STUDENT_SUMMARY[1]]
    r = first(summary.scores, STUDENT_FINAL_LABELS)
    if r is None:
        return None
    return f"{r['ndcg_at_10_mean']:.3f} ± {r['ndcg_at_10_std']:.3f}", ", ".join(map(str, summary.seeds))
