"""Choose tiny CARE's settings on a validation split carved from the dev set's train file: a sweep per seed.

``bench_care.py`` reports the test split; settings must not be picked there. Per seed this script runs
``care train sweep`` (:func:`care.train.recipes.sweep.run_sweep`) on the dev set: the tiny recipe (``configs/care_tiny``,
random-init tiny BERT / Qwen3 built from the dev set's texts, ``bench_care``'s settings) and its variants are trained
on ``train.jsonl`` (BM25-mined negatives) minus a validation split of whole query–answer components, and scored on
the held-out queries against the full corpus (nDCG@10), next to the recipe's own stages: symmetric large (the
target), the Stage I model (Stage II's start). Variants use the sweep's grammar (``care.train.recipes.variants``): items
``STAGE:KEY=VALUE``, ``recipe:FIELD=VALUE``, ``stage2:mine=N``, separated by ``;``. Stage I alone is
``stage1:...;recipe:skip_stage2=true``; the query side against the frozen document tower is
``stage2:stage=stage1_sft``. Every training and score resumes under ``--work``. Outputs
``benchmarks/results/care_validation/toyhom.{json,md}`` (means over every seed run so far). The logic is
:mod:`care.train.recipes.tiny_sweep`'s; this page holds the flags and the tiny runs' settings.

Usage::

    python -m benchmarks.tune_care_tiny --seeds 0 --threads 2 \\
        --variant doclr=stage2:optim.document_lr=1e-4 --variant 's1ep10=stage1:optim.epochs=10;recipe:skip_stage2=true' \\
        --variant s1ep10_s2=stage1:optim.epochs=10 --variant sft=stage2:stage=stage1_sft
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch starts its OpenMP pool
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse
import logging
from pathlib import Path

from benchmarks._common import add_allow_dirty, pin_code
from care.bench.locations import RESULTS, RUNS, dev_set
from care.bench.reports.records import save
from care.bench.selection import add_selections
from care.config import ConfigError
from care.train.recipes.tiny_sweep import (
    DOCUMENT_MAX_LENGTH,
    EPOCHS,
    choice,
    markdown,
    split_summary,
    summarise,
    sweep_seeds,
)
from care.train.recipes.variants import ITEM_SEPARATOR, parse_variant

#: The random-init "large" model is fully fine-tuned (no LoRA) in init_document and Stage II.
FULL_FINE_TUNE = ["init_document:model.lora=null", "stage2:model.lora=null"]


def tiny_settings(seed: int) -> list[str]:
    """Overrides of every tiny training here: seed, quiet logging, batch 32 without GradCache, epochs, length."""
    return [f"seed={seed}", "runtime.log_with=null", "runtime.progress_bar=false", "optim.batch_size=32",
            "optim.grad_cache_chunk_size=null", f"optim.epochs={EPOCHS}",
            f"model.document_max_seq_length={DOCUMENT_MAX_LENGTH}", *FULL_FINE_TUNE]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variant", action="append", default=[], metavar=f"NAME=ITEM{ITEM_SEPARATOR}ITEM...",
                        help="a variant in care train sweep's grammar (see the module docstring); repeatable")
    parser.add_argument("--work", type=Path, default=RUNS / "tune_care_tiny")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder (a smoke run writes elsewhere)")
    args = add_allow_dirty(parser).parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        variants = {v.name: list(v.items) for v in map(parse_variant, args.variant)}
    except ConfigError as exc:
        parser.error(str(exc))
    if not variants:
        parser.error("give at least one --variant (a sweep compares the recipe with its variants)")
    pin_code(args.results, args)  # the code that trains, not the checkout's when the record is written
    scores, report = sweep_seeds(dev_set(), args.work, args.seeds, variants, tiny_settings)
    rows, split = summarise(scores), split_summary(report)
    lines = markdown(rows, split, "benchmarks.tune_care_tiny")
    save("care_validation", "toyhom", config={"split": split, "variants": variants},
         seeds=sorted({s for r in rows.values() for s in r["seeds"]}), scores=rows, markdown="\n".join(lines),
         results=args.results, extra=add_selections({}, [choice(rows)]))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
