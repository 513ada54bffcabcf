"""One paper table at tiny scale: train what it needs, evaluate with the harness, write the table.

Tables (the paper's numbering):

* 4  — asymmetric vs symmetric at two document-encoder sizes: symmetric small (tiny BERT after
  ``init_query``), symmetric large (tiny Qwen3, and a 2x wider/deeper one, after ``init_document``),
  CARE with each document encoder;
* 5  — stages and losses: full CARE; w/o query init; w/o document init; w/o Stage I; w/o Stage II;
  Stage I w/o MSE; Stage I w/o contrastive (:class:`care.train.recipes.recipe.RecipeConfig` switches);
* 6  — Stage I data: alignment rows vs the fine-tuning file;
* 7  — alternative efficient retrievers: CARE vs KALE, Wang & Lyu, ScalingNote, score distillation
  (:func:`care.train.recipes.baselines.run_baseline`, sharing CARE's trained document tower);
* 12 — query-encoder pretraining before ``init_query``: none vs RetroMAE vs unsupervised contrastive
  vs RetroMAE -> contrastive (:mod:`care.pretrain`, checkpoints cached under the work folder).

Each variant is trained per seed under ``<work>/<dataset>/seed<k>/runs/<run>`` (resumable; runs shared
between tables are trained once), evaluated with the harness (demo: retrieval nDCG@10 and rerank
MAP@10; toyhom: test-split nDCG@10 over the full corpus), and the table is written to
``benchmarks/results/table<N>_<dataset>.json`` and ``.md`` (mean ± sample std over seeds, per-seed values).

Usage::

    python -m benchmarks.paper_tables --table 5 --dataset demo --seeds 0 1 2
    python -m benchmarks.paper_tables --table 12 --dataset toyhom --seeds 0 1 2 --rows 512 --pretrain-steps 300
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from pathlib import Path

from benchmarks._common import RUNS as RUNS_FOLDER
from benchmarks.bench_results import save
from care.experiments.paper_tables import Run, SeedWork, Sizes, Variant, load_dataset, summarise, to_markdown

logger = logging.getLogger("paper_tables")

_SHARE_INITS = {"init_query": "care", "init_document": "care"}

#: Every training run a table may need (name -> switches). Stages whose inputs an ablation leaves
#: unchanged are linked from the full-CARE run (``share``) instead of retrained.
RUNS: dict[str, Run] = {
    "care": Run(),
    "care_doc_large": Run(document="large"),
    "no_query_init": Run(recipe={"skip_query_init": True}, share={"init_document": "care"}),
    "no_document_init": Run(recipe={"skip_document_init": True}, share={"init_query": "care"}),
    "no_stage1": Run(recipe={"skip_stage1": True}, share=_SHARE_INITS),
    "no_stage2": Run(recipe={"skip_stage2": True}, share={**_SHARE_INITS, "stage1": "care"}),
    "stage1_no_mse": Run(recipe={"overrides": ["stage1:loss.lambda_mse=0"]}, share=_SHARE_INITS),
    "stage1_no_contrastive": Run(recipe={"overrides": ["stage1:loss.lambda_contrastive=0"]}, share=_SHARE_INITS),
    "stage1_finetune_data": Run(recipe={"stage1_data": "finetune"}, share=_SHARE_INITS),
    **{f"baseline_{b}": Run(kind="baseline", baseline=b) for b in ("kale", "wang_lyu", "scalingnote", "score_distill")},
    **{f"pretrain_{p}": Run(kind="pretrain", pretrain=p) for p in ("retromae", "contrastive", "retromae_contrastive")},
    **{f"care_pre_{p}": Run(query_pretrain=f"pretrain_{p}", share={"init_document": "care"})
       for p in ("retromae", "contrastive", "retromae_contrastive")},
}

TABLES: dict[str, tuple[str, list[Variant]]] = {
    "4": ("asymmetric vs symmetric, two document-encoder sizes", [
        Variant("symmetric small (tiny BERT)", "care", "init_query/query"),
        Variant("symmetric large (tiny Qwen3)", "care", "init_document/document"),
        Variant("symmetric large (tiny Qwen3 x2)", "care_doc_large", "init_document/document"),
        Variant("CARE (doc: tiny Qwen3)", "care"),
        Variant("CARE (doc: tiny Qwen3 x2)", "care_doc_large"),
    ]),
    "5": ("stages and losses", [
        Variant("CARE (full)", "care"),
        Variant("w/o query init", "no_query_init"),
        Variant("w/o document init", "no_document_init"),
        Variant("w/o Stage I", "no_stage1"),
        Variant("w/o Stage II", "no_stage2", "stage1/model"),
        Variant("Stage I w/o MSE", "stage1_no_mse"),
        Variant("Stage I w/o contrastive", "stage1_no_contrastive"),
    ]),
    "6": ("Stage I data", [
        Variant("Stage I on alignment data (CARE)", "care"),
        Variant("Stage I on fine-tuning data", "stage1_finetune_data"),
    ]),
    "7": ("alternative efficient retrievers", [
        Variant("CARE", "care"),
        Variant("KALE", "baseline_kale", "eval_model"),
        Variant("Wang & Lyu", "baseline_wang_lyu", "eval_model"),
        Variant("ScalingNote", "baseline_scalingnote", "eval_model"),
        Variant("score distillation", "baseline_score_distill", "eval_model"),
    ]),
    "12": ("query-encoder pretraining", [
        Variant("no pretraining (CARE)", "care"),
        Variant("RetroMAE", "care_pre_retromae"),
        Variant("unsupervised contrastive", "care_pre_contrastive"),
        Variant("RetroMAE + contrastive", "care_pre_retromae_contrastive"),
    ]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True, choices=sorted(TABLES, key=int))
    parser.add_argument("--dataset", default="demo", choices=["demo", "toyhom"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--work", type=Path, default=RUNS_FOLDER / "paper_tables")
    defaults = Sizes()
    parser.add_argument("--rows", type=int, default=defaults.rows, help="training rows per stage")
    parser.add_argument("--epochs", type=int, default=defaults.epochs, help="epochs per stage")
    parser.add_argument("--doc-max-length", type=int, default=defaults.document_max_length,
                        help="document tokens (characters)")
    parser.add_argument("--pretrain-steps", type=int, default=defaults.pretrain_steps,
                        help="optimiser steps per pretraining run (Table 12)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    sizes = dataclasses.replace(defaults, rows=args.rows, epochs=args.epochs, document_max_length=args.doc_max_length,
                                pretrain_steps=args.pretrain_steps)
    title, variants = TABLES[args.table]
    # Runs depend on the sizes: a folder per size setting keeps differently sized runs apart.
    tag = f"r{sizes.rows}_e{sizes.epochs}_d{sizes.document_max_length}_p{sizes.pretrain_steps}"
    root = args.work.resolve() / args.dataset
    ds, tasks = load_dataset(args.dataset, root / "data")
    per_seed = {}
    seconds = {}
    for seed in args.seeds:
        work = SeedWork(ds, tasks, root / tag / f"seed{seed}", seed, sizes, RUNS)
        per_seed[seed] = {}
        for variant in variants:
            started = time.perf_counter()
            per_seed[seed][variant.label] = work.evaluate(variant)
            seconds[f"seed{seed} {variant.label}"] = round(time.perf_counter() - started, 1)
    settings = {**dataclasses.asdict(sizes), "threads": args.threads,
                "seconds_this_invocation": seconds}
    summary = summarise(args.table, title, args.dataset, per_seed, variants, settings)
    markdown = to_markdown(summary)
    save("paper_tables", f"table{args.table}_{args.dataset}", config=summary["settings"], seeds=summary["seeds"],
         scores=summary["rows"], extra={k: v for k, v in summary.items() if k not in ("settings", "seeds", "rows")},
         markdown=markdown)
    print(markdown)


if __name__ == "__main__":
    main()
