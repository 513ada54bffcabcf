"""``benchmarks/bench_speed.py``'s report: ``speed.md`` beside ``speed.json`` (:func:`write_markdown`, one part per
measured section) and the ``plot`` section (:func:`plot`): quality against batch-1 queries/s like the paper's
Figure 1, only where the speed means something (:mod:`care.bench.figure`).

Quality comes from the int8 encoders' own benchmark records (``quantization/``, the e5 student's seed summary), speed
from the ``student`` section (same int8 engine, self-checked); the paper-shape towers of the ``encoders`` section are
drawn as lines (random weights: speed only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from care.bench.reports.paths import RESULTS

#: Quality of the int8 encoders placed in the figure, from their own benchmarks' records.
QUANTIZATION_RECORD = RESULTS / "quantization" / "toyhom_e5_L12.json"
STUDENT_RECORD = RESULTS / "e5_student_L6_stage1_strided_lr2e-4_s1ep4_sent10000_nodoc_tq_qprefix_sft_lr5e-5_ep2_neg0_seeds.json"
STUDENT_INT8_ROW = "after supervised fine-tune (query side only), ONNX int8"


def recorded_quality() -> dict[str, tuple[float, str]]:
    """nDCG@10 on the dev set of the int8 encoders in the figure, from their benchmarks' records."""
    out = {}
    if QUANTIZATION_RECORD.is_file():
        record = json.loads(QUANTIZATION_RECORD.read_text(encoding="utf-8"))
        chosen = record["config"].get("care_int8_variant")
        if chosen:
            out["e5 12 layers, ONNX int8"] = (record["scores"]["ndcg_at_10"][chosen], str(QUANTIZATION_RECORD.relative_to(RESULTS)))
    if STUDENT_RECORD.is_file():
        rows = json.loads(STUDENT_RECORD.read_text(encoding="utf-8"))["rows"]
        if STUDENT_INT8_ROW in rows:
            out["e5 student shape (6 strided layers), ONNX int8"] = (rows[STUDENT_INT8_ROW]["mean"], STUDENT_RECORD.name)
    return out


def plot(results: dict[str, Any], png: Path) -> dict[str, Any]:
    """Quality against batch-1 queries/s where the speed means something: e5 and the e5 student in the same
    int8 engine (points: quality from their records, speed from the ``student`` section), and the
    paper-shape towers of the ``encoders`` section as vertical lines (random weights: no quality).
    Nothing is placed on the speed axis unless its latency self-check passed."""
    from care.bench.figure import QualityPoint, quality_speed_figure

    quality = recorded_quality()
    student = results.get("student", {})
    points = []
    for label, (score, source) in quality.items():
        row = student.get("rows", {}).get(label)
        qps = 1000 / row["latency_ms_b1"] if row and student.get("trusted") and not row["overhead_dominated"] else None
        points.append({"model": label, "score": score, "qps": qps, "source": source})
    encoders = results.get("encoders", {})
    trusted = encoders.get("onnx_int8_speedup_b1") is not None
    speeds = {f"paper-shape {name}": 1000 / row["latency_ms_b1"] for name, row in encoders.get("rows", {}).items()
              if trusted and not row.get("overhead_dominated")}
    speeds = {(k.replace("paper-shape doc-", "doc-")): v for k, v in speeds.items()}
    quality_speed_figure([QualityPoint(p["model"], p["score"], p["qps"]) for p in points], png, speed_lines=speeds,
                         ylabel="nDCG@10, dev set (toyhom test)",
                         xlabel="queries/s on one CPU thread, batch 1, log (points: e5 / student in ONNX int8; "
                                "lines: paper-shape towers, random weights)")
    return {"png": png.name, "quality_points": points, "encoder_qps_b1": {k: round(v, 3) for k, v in speeds.items()}}


def write_markdown(results: dict[str, Any], path: Path) -> None:
    """Write ``results`` (the merged ``speed.json``) as Markdown to ``path``."""
    lines = ["# Speed (CPU)", "", f"Machine: {results['machine']}. Produced by (sections merge into one JSON):", ""]
    for run in results.get("runs", [{"command": results["command"], "sections": ["all"], "created": results["created"]}]):
        lines.append(f"- `{run['command']}` ({', '.join(run['sections'])}; {run['created']})")
    lines.append("")
    enc = results.get("encoders")
    if enc:
        q = enc["query_model"]
        lines += ["## Query encoding vs the document encoder (paper shapes, random weights)", "",
                  (f"Query tower: {q['shape']}, {q['parameters_measured']:,} parameters measured (character vocabulary of "
                  f"{q['vocab']}; {q['parameters_with_250k_vocab']:,} with the real 250k vocabulary — the difference is the "
                  f"embedding table, a lookup). Mean query length {q['mean_query_tokens']} tokens. Document towers: Qwen3 "
                  "shapes, fp32, measured with few layers and scaled linearly to 36."), "",
                  "| encoder | batch-1 latency (ms, p50 (p10, p90)) | batch-32 throughput (q/s) | min cosine to torch |", "|---|---|---|---|"]
        for name, row in enc["rows"].items():
            spread = f" ({row['p10_ms']}, {row['p90_ms']})" if "p10_ms" in row else ""
            lines.append(f"| {name} | {row['latency_ms_b1']}{spread} | {row['throughput_qps_b32']} | {row.get('min_cosine_to_torch', '')} |")
        lines += ["", enc.get("latency_self_check", "(measured before the latency self-check existed)") + ".", "",
                  f"ONNX int8 vs torch fp32 at batch 1: **{enc['onnx_int8_speedup_b1']}×** (target ≥ 2.5×).",
                  (f"LLM document encoder / CARE query encoder (ONNX int8) at batch 1: {enc['query_vs_llm_b1']} (target ≥ 10×); "
                  f"vs torch fp32 query encoder: {enc['query_vs_llm_b1_torch']}."), ""]
    stu = results.get("student")
    if stu:
        lines += ["## e5 and the e5 student's shape in the same int8 engine (one thread, batch 1)", "",
                  f"int8 options {stu['int8_options']}; {stu['note']}.", "",
                  "| encoder | p50 ms (p10, p90) | overhead-dominated |", "|---|---|---|"]
        for name, row in stu["rows"].items():
            lines.append(f"| {name} | {row['latency_ms_b1']} ({row['p10_ms']}, {row['p90_ms']}) | {row['overhead_dominated']} |")
        ratio = stu["e5_over_student_b1"]
        lines += ["", stu["self_check"] + ".", "",
                  f"e5 (12 layers) / student shape (6 layers), same engine: **{ratio:.2f}×**." if ratio else
                  "No e5 / student ratio: the self-check failed.", ""]
    idx = results.get("index")
    if idx:
        lines += ["## Vector search (batch 1)", "", idx.get("note", ""), "",
                  "| data | index | search setting | vectors | build (s) | p50 (ms) | recall@10 vs exact |", "|---|---|---|---|---|---|---|"]
        for row in idx["rows"]:
            if "skipped" in row:
                lines.append(f"| {row['data']} | {row['type']} | | {row['n']:,} | | skipped: {row['skipped']} | |")
            else:
                setting = f"{row['param']}={row['value']}" if row["param"] else ""
                lines.append(f"| {row['data']} | {row['type']} | {setting} | {row['n']:,} | {row['build_s']} | {row['p50_ms']} | {row['recall@10']} |")
        lines.append("")
    lines += ["## Service", "", ("Measured by `benchmarks/service_load.py` (the e5 student's int8 encoder, 100k documents, "
              "1-64 clients beside the bare loop): `benchmarks/results/service_load/`."), ""]
    if results.get("plot"):
        fig = results["plot"]
        placed = [p for p in fig.get("quality_points", []) if p["qps"]]
        lines += ["## Figure", "", f"![quality vs speed]({fig['png']})", "",
                  "Points: " + (", ".join(f"{p['model']} nDCG@10 {p['score']:.4f} at {p['qps']:.0f} q/s ({p['source']})" for p in placed)
                                or "none placed (no trusted latency)") + ". Quality comes from each encoder's own benchmark record, "
                  "speed from the `student` section (same int8 engine, same run, self-checked). Vertical lines: the "
                  "paper-shape towers of the `encoders` section (random weights, so speed only).", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
