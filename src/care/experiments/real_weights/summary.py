"""The real-weights table (``bench_real_weights --summarise``): every seed's record aggregated.

:func:`summarise` reads the records ``real_weights/<split>[_<tag>]_seed<K>`` of the seeds asked for and writes
``real_weights/<split>[_<tag>]`` (.json and .md): per row nDCG@10 per seed, mean and std; the checks CARE /
symmetric large, CARE - symmetric small and peer - symmetric large, each on the seeds that hold both rows
(:func:`paired_means`); zero-shot travel; the diagnosis records; query latency measured on this machine
(``--latency``: :func:`care.experiments.real_weights.latency.query_latency`); the selections the seeds made.
"""

from __future__ import annotations

import argparse
import logging
import statistics
from collections.abc import Callable

from care.bench.record import BenchmarkRecord, read_records, write_record
from care.bench.selection import SELECTION_KEY
from care.data.io import atomic_write
from care.experiments.real_weights import EXPERIMENT
from care.experiments.real_weights.latency import SELF_CHECK, SELF_CHECK_BACK_TO_BACK
from care.experiments.real_weights.peer import PEER, PEER_ROW
from care.experiments.real_weights.towers import QUERY_LAYERS

logger = logging.getLogger("bench_real_weights")

#: A travel row costing more than this share of e5 zero-shot's score is flagged in the table.
TRAVEL_COST_FLAG = 0.98


def paired_means(runs: dict[int, BenchmarkRecord], a: str, b: str, compare: Callable[[float, float], float]) -> float:
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


def _rows(runs: dict[int, BenchmarkRecord]) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for label in dict.fromkeys(k for r in runs.values() for k in r.scores):
        seeds = [s for s in sorted(runs) if label in runs[s].scores]
        values = [runs[s].scores[label]["ndcg_at_10"] for s in seeds]
        rows[label] = {"per_seed": values, "seeds": seeds, "mean": statistics.mean(values),
                       "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    return rows


def _travel(runs: dict[int, BenchmarkRecord]) -> dict[str, dict[str, float]]:
    travel: dict[str, dict[str, list[float]]] = {}
    for record in runs.values():
        for task, scores in record.extra.get("travel", {}).items():
            for label, value in scores.items():
                travel.setdefault(task, {}).setdefault(label, []).append(value["ndcg_at_10"])
    return {task: {label: statistics.mean(v) for label, v in scores.items()} for task, scores in travel.items()}


def _checks(runs: dict[int, BenchmarkRecord], rows: dict[str, dict]) -> dict[str, float]:
    checks = {}
    if "symmetric large" in rows and "CARE" in rows:
        checks["CARE / symmetric large"] = paired_means(runs, "CARE", "symmetric large", lambda a, b: a / b)
        if "symmetric small" in rows:
            checks["CARE - symmetric small"] = paired_means(runs, "CARE", "symmetric small", lambda a, b: a - b)
        if PEER_ROW in rows:
            checks["peer - symmetric large"] = paired_means(runs, PEER_ROW, "symmetric large", lambda a, b: a - b)
    return checks


def summarise(args: argparse.Namespace) -> None:
    """Mean ± std over the seeds' records (``args.seeds`` of ``args.out``'s ``<split>[_<tag>]`` records), latency
    measured here side by side with ``args.latency``, the markdown table; writes both, prints the table.

    Raises:
        SystemExit: no record of those seeds.
    """
    from care.experiments.real_weights.latency import query_latency

    records = read_records(args.out, EXPERIMENT)
    split = "validation" if args.validation else "test"
    name = f"{split}_{args.tag}" if args.tag else split  # a tagged run (e.g. on a GPU) is summarised on its own
    runs = {r.seeds[0]: r for key, r in records.items() if key.startswith(f"{name}_seed")
            and r.seeds and r.seeds[0] in args.seeds}
    if not runs:
        raise SystemExit(f"no {name} records for seeds {args.seeds} under {args.out / EXPERIMENT}")
    rows = _rows(runs)
    diagnosis = {k: v for k, v in records.items() if k.startswith(f"diagnosis_{split}_seed")} if not args.tag else {}
    latency = query_latency(args) if args.latency else {}
    layers = sorted({r.config.get("layers", QUERY_LAYERS) for r in runs.values()})  # the CARE rows' query tower
    record = BenchmarkRecord(EXPERIMENT, name, config={"peer": seeds_peer(runs), "recipe": "preset:e5",
                                                        "layers": layers,
                                                        "devices": sorted({r.machine.get("gpu") or r.machine.get("cpu")
                                                                           for r in runs.values()})},
                             seeds=sorted(runs), scores=rows, latencies=latency,
                             extra={"checks": _checks(runs, rows), "travel": _travel(runs),
                                    "diagnosis": {k: r.scores for k, r in diagnosis.items()},
                                    SELECTION_KEY: seeds_selections(runs)})
    write_record(record, args.out)
    text = summary_markdown(record, split, args.tag, diagnosis)
    with atomic_write(args.out / EXPERIMENT / f"{name}.md") as fh:
        fh.write(text)
    print(text, end="")  # noqa: T201 - the script's report


def summary_markdown(record: BenchmarkRecord, split: str, tag: str, diagnosis: dict[str, BenchmarkRecord]) -> str:
    """The summary ``record`` as the table beside it: rows, checks, travel, the diagnosis records, latency."""
    rows, checks, travel, latency = record.scores, record.extra["checks"], record.extra["travel"], record.latencies
    devices, layers = ", ".join(record.config["devices"]), record.config["layers"]
    lines = [f"# CARE with real weights (multilingual-e5-small) — dev set, {split} split"
             f"{f' ({tag} records)' if tag else ''}, seeds {record.seeds}, on {devices}; "
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
            flag = " (costs more than 2 %)" if base and value < TRAVEL_COST_FLAG * base else ""
            lines.append(f"| {label} | {value:.4f} | {value / base - 1:+.1%}{flag} |" if base else f"| {label} | {value:.4f} | – |")
    for key, diag in diagnosis.items():
        lines += ["", f"Diagnosis ({key}): e5's 12 layers fine-tuned on the query side only against frozen e5 "
                  "documents, one change at a time:", "", "| setting | nDCG@10 |", "|---|---|"]
        lines += [f"| {label} | {value['ndcg_at_10']:.4f} |" for label, value in diag.scores.items()]
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
        for key in (SELF_CHECK, SELF_CHECK_BACK_TO_BACK):
            if key in latency:
                lines += ["", ("Back to back: " if key != SELF_CHECK else "") + latency[key]["description"] + "."]
    return "\n".join(lines) + "\n"
