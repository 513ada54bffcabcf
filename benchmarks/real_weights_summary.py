"""The real-weights table (``python -m benchmarks.bench_real_weights --summarise``): every seed's record of
``bench_real_weights`` aggregated (mean ± std per row, the checks CARE / symmetric large and CARE - symmetric small,
zero-shot travel), query latency measured on this machine (``--latency``: ONNX fp32 and int8, one thread, side by
side) and ``real_weights/<split>[_<tag>].md``. Run through ``bench_real_weights``; this module holds its reporting.
"""

from __future__ import annotations

import logging
import statistics
from urllib.parse import quote

from benchmarks.real_weights_setup import EXPERIMENT, PEER, PEER_ROW, QUERY_LAYERS, e5_cuts, e5_narrow, ensure_e5
from care.bench.record import BenchmarkRecord, read_records, write_record
from care.bench.reports.frontier_towers import BACK_TO_BACK, BM25_LATENCY  # the rows' names (the frontier reads them)
from care.bench.selection import SELECTION_KEY
from care.data.io import atomic_write, iter_jsonl
from care.models.e5_export import QUERY_PREFIX

logger = logging.getLogger("bench_real_weights")


def _paired_means(runs: dict[int, BenchmarkRecord], a: str, b: str, compare) -> float:
    """``compare(mean of a, mean of b)`` over the seeds whose records hold both rows (a row some seeds
    skipped is compared with the other row on those seeds only)."""
    seeds = [s for s in sorted(runs) if a in runs[s].scores and b in runs[s].scores]
    return compare(statistics.mean(runs[s].scores[a]["ndcg_at_10"] for s in seeds),
                   statistics.mean(runs[s].scores[b]["ndcg_at_10"] for s in seeds))


def seeds_peer(runs: dict[int, BenchmarkRecord]) -> dict | list:
    """The peer's settings the seeds' records name (one dict when they agree, else one per seed); :data:`PEER`
    (this checkout's defaults) only for records that name none."""
    peers = [r.config.get("peer", PEER) for _, r in sorted(runs.items())]
    return peers[0] if all(p == peers[0] for p in peers) else peers


def seeds_selections(runs: dict[int, BenchmarkRecord]) -> list[dict]:
    """Every selection the seeds' records keep (the selection protocol's block), each once."""
    kept: list[dict] = []
    for _, run in sorted(runs.items()):
        kept += [s for s in run.extra.get(SELECTION_KEY, []) if s not in kept]
    return kept


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
    record = BenchmarkRecord(EXPERIMENT, name, config={"peer": seeds_peer(runs), "recipe": "preset:e5",
                                                        "layers": layers,
                                                        "devices": sorted({r.machine.get("gpu") or r.machine.get("cpu")
                                                                           for r in runs.values()})},
                             seeds=sorted(runs), scores=rows, latencies=latency,
                             extra={"checks": checks, "travel": travel,
                                    "diagnosis": {k: r.scores for k, r in diagnosis.items()},
                                    SELECTION_KEY: seeds_selections(runs)})
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
        for key in ("_self_check", SELF_CHECK_BACK_TO_BACK):
            if key in latency:
                lines += ["", ("Back to back: " if key != "_self_check" else "") + latency[key]["description"] + "."]
    with atomic_write(args.out / EXPERIMENT / f"{name}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 - the script's report


#: Rows timed with ``transformers``' tokenizer call instead of the Rust tokenizer (care.encoders.token_feeds).
TOKENIZER_CALL = "transformers tokenizer call"
#: The engine BM25's speed-up is taken against (it has no query encoder, so no engine of its own to match).
BM25_REFERENCE_ENGINE = "onnxruntime int8"
SELF_CHECK_BACK_TO_BACK = "_self_check_back_to_back"


def query_latency(args) -> dict[str, dict]:
    """Single-query latency of e5's 12-layer query side and its strided cuts, ONNX fp32 and int8, side by side;
    the 12-layer and shallowest int8 graphs also with ``transformers``' tokenizer call (the fixed cost the
    direct Rust tokenizer removes), each compared with the 12-layer graph under the same tokenizer path; all of
    it twice: interleaved per query (every call follows another tower's: the conservative figure) and back to back
    (:data:`BACK_TO_BACK`). With ``--latency-bm25`` also BM25 answering each query from the test split's corpus
    (:data:`BM25_LATENCY`: tokenising, scoring every document, the top 10; a tower's time stops at its vector).

    Latency depends on the shape, not the weights: the untrained cuts time exactly as the trained towers.
    """
    from care.bench.latency import LatencySettings, measure_latency
    from care.encoders.onnx import OnnxQueryEncoder
    from care.models.onnx_export import export_query_encoder

    e5 = ensure_e5(args)
    queries = [r["text"] for _, r in iter_jsonl(args.data / "test_queries.jsonl")][:50]
    models, engines = {}, {}
    depths = sorted(set(args.latency_layers), reverse=True)
    # narrowed cuts of 2+ layers (a 1-layer tower's time is mostly fixed cost), int8 only: every session holds its
    # own copy of e5's 250k-row embedding table (~0.4 GB), so all of them at once would not fit in 24 GB
    towers = [(12, None), *((d, None) for d in depths), *((d, w) for w in args.latency_ffn for d in depths if d > 1)]
    for layers, width in towers:  # (depth, feed-forward width or None): the cuts, then the narrowed cuts
        base = (e5 if layers == 12 and not width else
                e5_narrow(e5, layers, width, args.work) if width else e5_cuts(e5, layers, args.work))
        folder = args.work / "latency" / (f"L{layers}" + (f"-ffn{width}" if width else ""))
        if not (folder / "model.int8.onnx").is_file():
            export_query_encoder(f"{base}?pooling=mean&query_prefix={quote(QUERY_PREFIX)}&instructions=false",
                                 folder, quantize=True)
        for int8 in ((True,) if width else (False, True)):
            label = (f"{layers} layers" + (f", FFN {width}" if width else "")
                     + (" (symmetric large's query side)" if layers == 12 and not width else ""))
            key = f"{label}, ONNX {'int8' if int8 else 'fp32'}"
            models[key] = OnnxQueryEncoder(folder, int8=int8, threads=1)
            engines[key] = f"onnxruntime {'int8' if int8 else 'fp32'}"
    for layers in (12, min(args.latency_layers)):  # the same graphs with transformers' tokenizer call: its cost
        label = f"{layers} layers" + (" (symmetric large's query side)" if layers == 12 else "")
        key = f"{label}, ONNX int8, {TOKENIZER_CALL}"
        models[key] = OnnxQueryEncoder(args.work / "latency" / f"L{layers}", int8=True, threads=1,
                                       direct_tokenizer=False)
        engines[key] = f"onnxruntime int8, {TOKENIZER_CALL}"
    if args.latency_bm25:
        from care.data.retrieval import load_retrieval_folder
        from care.encoders.bm25 import BM25Retriever

        corpus = load_retrieval_folder(args.data, split="test").corpus
        models[BM25_LATENCY] = BM25Retriever()
        models[BM25_LATENCY].index(list(corpus), [doc.full_text for doc in corpus.values()])
        engines[BM25_LATENCY] = "bm25s"
    control = next(k for k in models if k.endswith("ONNX int8") and not k.startswith("12 "))
    copy = OnnxQueryEncoder(models[control].folder, int8=True, threads=1)
    out: dict[str, dict] = {}
    for suffix, settings in (("", LatencySettings()), (BACK_TO_BACK, LatencySettings(block_calls=len(queries) // 2))):
        report = measure_latency(models, queries, control=(control, copy), settings=settings)
        logger.info("latency%s: %s", suffix, report.self_check.describe())
        for k in report.medians():  # the speed-up over symmetric large's query side in the same engine
            engine = BM25_REFERENCE_ENGINE if k == BM25_LATENCY else engines[k]
            same_engine_large = next(m for m in models if m.startswith("12 ") and engines[m] == engine)
            out[k + suffix] = {"engine": engines[k], **report.models[k].to_dict(),
                               "large_over_this": report.ratio(same_engine_large, k) if k != same_engine_large else 1.0}
        out[SELF_CHECK_BACK_TO_BACK if suffix else "_self_check"] = {
            "engine": "", "description": report.self_check.describe(), "passed": report.trusted}
    return out

