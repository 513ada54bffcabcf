"""``bench_speed``'s ``plot`` section: quality against batch-1 queries/s like the paper's Figure 1, only where the
speed means something (:mod:`care.bench.figure`).

Quality comes from the int8 encoders' own benchmark records (``quantization/``, the e5 student's seed
summary), speed from the ``student`` section (same int8 engine, self-checked); the paper-shape towers of the
``encoders`` section are drawn as lines (random weights: speed only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS

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
