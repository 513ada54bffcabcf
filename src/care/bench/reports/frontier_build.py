"""The frontier record (``frontier/test.json``) built from the ``real_weights`` records: one entry per query tower
(nDCG@10 mean ± std over seeds, its ratio to symmetric large of the same records, speed-ups over e5's 12-layer
query side in the same engine), then BM25 (its score from the harness's reference-model record, its speed from a
summary timed with ``--latency-bm25``)."""

from __future__ import annotations

import statistics
from typing import Any

from care.bench.record import BenchmarkRecord
from care.bench.reports.frontier_towers import (
    BACK_TO_BACK,
    BM25_DATASET,
    BM25_LATENCY,
    BM25_MODEL,
    BM25_RECORD,
    BM25_ROW,
    BM25_SOURCE,
    EXPERIMENT,
    FULL_DEPTH,
    GROUPS,
    LATENCY_RECORD,
    POINTS,
    SOURCE,
    VARIANTS,
    WARM,
    collect,
    ffn_width,
    group_machines,
    latency_by_depth,
    query_params,
    with_discovered_groups,
)


def _row_order(row: str) -> tuple[int, str]:
    """CARE, its variants, symmetric small, symmetric large, e5 zero-shot, BM25."""
    order = ("CARE", "CARE [", "symmetric small", "symmetric large", "e5 zero-shot")
    return next((i for i, name in enumerate(order) if row == name or (name.endswith("[") and row.startswith(name))),
                len(order)), row


def display(row: str, layers: int | None) -> str:
    return row if layers is None else f"{row} ({layers} layer{'' if layers == 1 else 's'})"


def build(records: dict[str, BenchmarkRecord], shapes: dict[str, int] | None = None,
          groups: dict[str, str] = GROUPS, variants: tuple[str, ...] = VARIANTS,
          extra_groups: dict[str, str] | None = None, baselines: BenchmarkRecord | None = None) -> BenchmarkRecord:
    """The frontier record (not written): ``extra.frontier`` one entry per tower, deepest rows last, then BM25
    (:func:`bm25_point`) where ``baselines`` scores it and a summary record times it.
    ``extra_groups`` (:func:`named_groups`) are read after ``groups`` and the discovered ones."""
    groups = {**with_discovered_groups(records, groups), **(extra_groups or {})}
    towers = collect(records, groups, variants)
    if not towers:
        raise SystemExit(f"no records named {', '.join(p + 'K' for p in groups.values())} to build the frontier from")
    latency_record = records.get(LATENCY_RECORD)
    timings = latency_by_depth(latency_record.latencies) if latency_record else {}
    entries = []
    for (row, layers), found in sorted(towers.items(), key=lambda t: (_row_order(t[0][0]), t[0][1] or 0)):
        seeds = sorted(found["per_seed"])
        values = [found["per_seed"][s] for s in seeds]
        mean = statistics.mean(values)
        paired = all(s in found["large"] for s in seeds)
        width = ffn_width(row)
        int8, fp32 = timings.get((layers, width, "int8")), timings.get((layers, width, "fp32"))
        warm = {kind: timings.get((layers, width, kind + WARM)) for kind in ("int8", "fp32")}
        entries.append({
            "row": row, "layers": layers, "ffn_width": width, **query_params(shapes, layers, width),
            "speedup_int8": int8.get("large_over_this") if int8 else None,
            "speedup_fp32": fp32.get("large_over_this") if fp32 else None,
            **{f"speedup_{kind}{WARM}": t.get("large_over_this") if t else None for kind, t in warm.items()},
            f"int8_p50_ms{WARM}": warm["int8"]["p50_ms"] if warm["int8"] else None,
            "int8_p50_ms": int8["p50_ms"] if int8 else None, "fp32_p50_ms": fp32["p50_ms"] if fp32 else None,
            "int8_qps": 1000.0 / int8["p50_ms"] if int8 else None,
            "ndcg_at_10_mean": mean, "ndcg_at_10_std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "ndcg_at_10_per_seed": values, "seeds": seeds,
            "ratio_to_symmetric_large": mean / statistics.mean(found["large"][s] for s in seeds) if paired else None,
            "ratio_to_symmetric_large_per_seed": [found["per_seed"][s] / found["large"][s] for s in seeds]
            if paired else None,  # each seed against its own symmetric large, beside the ratio of means
            "group": found["group"], "records": found["records"]})
    bm25 = next((e for e in entries if e["row"] == BM25_ROW), None) or bm25_point(baselines, entries)
    if bm25 is not None and bm25 not in entries:
        entries.append(bm25)
    timing = bm25_timing(records, [LATENCY_RECORD, *(f"test_{tag}" for tag in (extra_groups or {}))], entries)
    if bm25 is not None and timing is not None:
        bm25.update(timing)
    config = {"source": SOURCE, "groups": groups, "machines": group_machines(records, groups),
              "variants": list(variants), "latency_record": LATENCY_RECORD,
              "e5_shapes": shapes, "speedup": "p50 of e5's 12-layer query side / p50 of this tower, same engine; "
              f"interleaved per query, and back to back ({WARM[1:]}: each tower answering consecutive queries)",
              "latency": {"machine": latency_record.machine, "date": latency_record.date,
                          "self_check": latency_record.latencies.get("_self_check"),
                          f"self_check{WARM}": latency_record.latencies.get(f"_self_check{WARM}")}
              if latency_record else None,
              "bm25": {"score": ", ".join(bm25["records"]), "latency": bm25.get("latency_record")} if bm25 else None}
    return BenchmarkRecord(
        EXPERIMENT, "test", config=config, seeds=sorted({s for e in entries for s in e["seeds"]}),
        scores={display(e["row"], e["layers"]): {"ndcg_at_10": e["ndcg_at_10_mean"], "std": e["ndcg_at_10_std"]}
                for e in entries},
        latencies={display(e["row"], e["layers"]): {"int8_p50_ms": e["int8_p50_ms"], "fp32_p50_ms": e["fp32_p50_ms"]}
                   for e in entries if e["int8_p50_ms"] is not None},
        extra={"frontier": entries})


def bm25_timing(records: dict[str, BenchmarkRecord], latency_records: list[str],
                towers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """BM25's speed fields of a frontier entry, or None where no record times it.

    Its speed-ups are over the 12-layer int8 graph timed beside it in the first of ``latency_records`` whose
    latencies hold :data:`BM25_LATENCY`; it is placed on the int8 queries/s axis at that speed-up times symmetric
    large's queries/s in ``towers`` (the towers' clock, :data:`LATENCY_RECORD`).
    """
    timed = next((name for name in latency_records if name in records and BM25_LATENCY in records[name].latencies),
                 None)
    if timed is None:
        return None
    latencies = records[timed].latencies
    speedup = latencies[BM25_LATENCY]["large_over_this"]
    large = _symmetric_large(towers)
    large_qps = large["int8_qps"] if large else None
    return {"speedup_int8": speedup, f"speedup_int8{WARM}":
            (latencies.get(BM25_LATENCY + BACK_TO_BACK) or {}).get("large_over_this"),
            "p50_ms": latencies[BM25_LATENCY]["p50_ms"], "engine": latencies[BM25_LATENCY].get("engine"),
            "int8_qps": large_qps * speedup if large_qps and speedup else None, "latency_record": timed}


def bm25_point(baselines: BenchmarkRecord | None, towers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """BM25's frontier entry from the harness's reference-model record (BM25 is deterministic: one value, no
    seeds), its ratio against symmetric large's entry in ``towers``; None where ``baselines`` does not score it."""
    models = baselines.scores.get(BM25_DATASET, {}).get("models", {}) if baselines else {}
    score = models.get(BM25_MODEL, {}).get("retrieval", {}).get("scores", {}).get("ndcg_at_10")
    if score is None:
        return None
    large = _symmetric_large(towers)
    return {"row": BM25_ROW, "layers": None, "ffn_width": None, "params": None, "params_transformer": None,
            "speedup_int8": None, "speedup_fp32": None, f"speedup_int8{WARM}": None, f"speedup_fp32{WARM}": None,
            f"int8_p50_ms{WARM}": None, "int8_p50_ms": None, "fp32_p50_ms": None, "int8_qps": None,
            "ndcg_at_10_mean": score, "ndcg_at_10_std": 0.0, "ndcg_at_10_per_seed": [], "seeds": [],
            "ratio_to_symmetric_large": score / large["ndcg_at_10_mean"] if large else None,
            "group": None, "records": [f"{BM25_SOURCE}/{BM25_RECORD}"]}


def _symmetric_large(towers: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in towers if e["row"] == POINTS[1] and e["layers"] == FULL_DEPTH), None)
