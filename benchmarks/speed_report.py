"""``bench_speed``'s Markdown report: ``speed.md`` beside ``speed.json``, one part per measured section."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
