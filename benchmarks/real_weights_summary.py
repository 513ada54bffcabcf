"""The real-weights table (``python -m benchmarks.bench_real_weights --summarise``): every seed's record of
``bench_real_weights`` aggregated (mean ± std per row, the checks CARE / symmetric large and CARE - symmetric small,
zero-shot travel), query latency measured on this machine (``--latency``: ONNX fp32 and int8, one thread, side by
side) and ``real_weights/<split>[_<tag>].md``. Run through ``bench_real_weights``; this module holds its reporting.
"""

from __future__ import annotations

import logging
import statistics
from urllib.parse import quote

from benchmarks.real_weights_setup import EXPERIMENT, PEER, PEER_ROW, QUERY_LAYERS, e5_cuts, ensure_e5
from care.bench.record import BenchmarkRecord, read_records, write_record
from care.data.io import atomic_write, iter_jsonl
from care.models.e5_export import QUERY_PREFIX

logger = logging.getLogger("bench_real_weights")


def _paired_means(runs: dict[int, BenchmarkRecord], a: str, b: str, compare) -> float:
    """``compare(mean of a, mean of b)`` over the seeds whose records hold both rows (a row some seeds
    skipped is compared with the other row on those seeds only)."""
    seeds = [s for s in sorted(runs) if a in runs[s].scores and b in runs[s].scores]
    return compare(statistics.mean(runs[s].scores[a]["ndcg_at_10"] for s in seeds),
                   statistics.mean(runs[s].scores[b]["ndcg_at_10"] for s in seeds))


def summarise(args) -> None:
    """Mean ± std over the seeds' records, latency measured here side by side, the markdown table."""
    records = read_records(args.out, EXPERIMENT)
    split = "validation" if args.validation else "test"
    name = f"{split}_{args.tag}" if args.tag else split  # a tagged run (e.g. on a GPU) is summarised on its own
    runs = {r.seeds[0]: r for key, r in records.items() if key.startswith(f"{name}_seed")
            and r.seeds and r.seeds[0] in args.seeds}
    if not runs:
        raise SystemExit(f"no {name} records for seeds {args.seeds} under {args.out / EXPERIMENT}")
    rows: dict[str, dict] = {}
    for label in dict.fromkeys(k for r in runs.values() for k in r.scores):
        seeds = [s for s in sorted(runs) if label in runs[s].scores]
        values = [runs[s].scores[label]["ndcg_at_10"] for s in seeds]
        rows[label] = {"per_seed": values, "seeds": seeds, "mean": statistics.mean(values),
                       "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    travel: dict[str, dict[str, float]] = {}
    for record in runs.values():
        for task, scores in record.extra.get("travel", {}).items():
            for label, value in scores.items():
                travel.setdefault(task, {}).setdefault(label, []).append(value["ndcg_at_10"])
    travel = {task: {label: statistics.mean(v) for label, v in scores.items()} for task, scores in travel.items()}
    diagnosis = {k: v for k, v in records.items() if k.startswith(f"diagnosis_{split}_seed")} if not args.tag else {}
    latency = query_latency(args) if args.latency else {}
    checks = {}
    if "symmetric large" in rows and "CARE" in rows:
        checks["CARE / symmetric large"] = _paired_means(runs, "CARE", "symmetric large", lambda a, b: a / b)
        if "symmetric small" in rows:
            checks["CARE - symmetric small"] = _paired_means(runs, "CARE", "symmetric small", lambda a, b: a - b)
        if PEER_ROW in rows:
            checks["peer - symmetric large"] = _paired_means(runs, PEER_ROW, "symmetric large", lambda a, b: a - b)
    layers = sorted({r.config.get("layers", QUERY_LAYERS) for r in runs.values()})  # the CARE rows' query tower
    record = BenchmarkRecord(EXPERIMENT, name, config={"peer": PEER, "recipe": "preset:e5", "layers": layers,
                                                        "devices": sorted({r.machine.get("gpu") or r.machine.get("cpu")
                                                                           for r in runs.values()})},
                             seeds=sorted(runs), scores=rows, latencies=latency,
                             extra={"checks": checks, "travel": travel,
                                    "diagnosis": {k: r.scores for k, r in diagnosis.items()}})
    write_record(record, args.out)
    devices = ", ".join(record.config["devices"])
    lines = [f"# CARE with real weights (multilingual-e5-small) — dev set, {split} split"
             f"{f' ({args.tag} records)' if args.tag else ''}, seeds {sorted(runs)}, on {devices}; "
             f"query tower (CARE, symmetric small): e5 cut to {' / '.join(map(str, layers))} strided layers", "",
             "| row | nDCG@10 mean | std | per seed |", "|---|---|---|---|"]
    for label, r in rows.items():
        per_seed = ", ".join(f"{v:.4f} (seed {seed})" for seed, v in zip(r["seeds"], r["per_seed"], strict=True))
        lines.append(f"| {label} | {r['mean']:.4f} | {r['std']:.4f} | {per_seed} |")
    if checks:
        lines += ["", "| check | value |", "|---|---|", *(f"| {k} | {v:.4f} |" for k, v in checks.items())]
    for task, scores in travel.items():
        base = scores.get("e5 zero-shot")
        lines += ["", f"Zero-shot on {task} (trained on the dev set only; mean over seeds):", "",
                  "| row | nDCG@10 | vs e5 zero-shot |", "|---|---|---|"]
        for label, value in scores.items():
            flag = " (costs more than 2 %)" if base and value < 0.98 * base else ""
            lines.append(f"| {label} | {value:.4f} | {value / base - 1:+.1%}{flag} |" if base else f"| {label} | {value:.4f} | – |")
    for key, record in diagnosis.items():
        lines += ["", f"Diagnosis ({key}): e5's 12 layers fine-tuned on the query side only against frozen e5 "
                  "documents, one change at a time:", "", "| setting | nDCG@10 |", "|---|---|"]
        lines += [f"| {label} | {value['ndcg_at_10']:.4f} |" for label, value in record.scores.items()]
    if latency:
        lines += ["", "Query latency (ms, batch 1, one thread, this machine, side by side):", "",
                  "| query tower | engine | p50 | p10 | p90 | symmetric large's query side / this (same engine) |",
                  "|---|---|---|---|---|---|"]
        for label, lat in latency.items():
            if label.startswith("_"):
                continue
            ratio = lat.get("large_over_this")
            lines.append(f"| {label} | {lat['engine']} | {lat['p50_ms']:.2f} | {lat['p10_ms']:.2f} | {lat['p90_ms']:.2f} | "
                         f"{f'{ratio:.2f}x' if ratio else '– (not comparable)'} |")
        if "_self_check" in latency:
            lines += ["", latency["_self_check"]["description"] + "."]
    with atomic_write(args.out / EXPERIMENT / f"{name}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 - the script's report


def query_latency(args) -> dict[str, dict]:
    """Single-query latency of e5's 12-layer query side and its strided cuts, ONNX fp32 and int8, side by side.

    Latency depends on the shape, not the weights: the untrained cuts time exactly as the trained towers.
    """
    from care.bench.latency import measure_latency
    from care.encoders.onnx import OnnxQueryEncoder
    from care.models.onnx_export import export_query_encoder

    e5 = ensure_e5(args)
    queries = [r["text"] for _, r in iter_jsonl(args.data / "test_queries.jsonl")][:50]
    models, engines = {}, {}
    for layers in (12, *sorted(set(args.latency_layers), reverse=True)):
        base = e5 if layers == 12 else e5_cuts(e5, layers, args.work)
        folder = args.work / "latency" / f"L{layers}"
        if not (folder / "model.int8.onnx").is_file():
            export_query_encoder(f"{base}?pooling=mean&query_prefix={quote(QUERY_PREFIX)}&instructions=false",
                                 folder, quantize=True)
        for int8 in (False, True):
            label = f"{layers} layers" + (" (symmetric large's query side)" if layers == 12 else "")
            key = f"{label}, ONNX {'int8' if int8 else 'fp32'}"
            models[key] = OnnxQueryEncoder(folder, int8=int8, threads=1)
            engines[key] = f"onnxruntime {'int8' if int8 else 'fp32'}"
    control = next(k for k in models if k.endswith("ONNX int8") and not k.startswith("12 "))
    report = measure_latency(models, queries, control=(control, OnnxQueryEncoder(models[control].folder, int8=True,
                                                                                  threads=1)))
    logger.info("latency: %s", report.self_check.describe())
    out = {k: {"engine": engines[k], **report.models[k].to_dict()} for k in report.medians()}
    for k in out:  # the speed-up over symmetric large's query side in the same engine (None: not comparable)
        same_engine_large = next(m for m in models if m.startswith("12 ") and engines[m] == engines[k])
        out[k]["large_over_this"] = report.ratio(same_engine_large, k) if k != same_engine_large else 1.0
    out["_self_check"] = {"engine": "", "description": report.self_check.describe(), "passed": report.trusted}
    return out

