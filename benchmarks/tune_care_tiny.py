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
``benchmarks/results/care_validation/toyhom.{json,md}`` (means over every seed run so far).

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
import json
import logging
from pathlib import Path

import numpy as np

from benchmarks._common import RESULTS, ROOT, RUNS, add_allow_dirty, dev_set, pin_code
from benchmarks.bench_results import save
from care.bench.selection import VALIDATION, Selection, add_selections
from care.config import ConfigError
from care.data.io import iter_jsonl, write_json
from care.train.recipes.sweep import BASE, SweepConfig, run_sweep
from care.train.recipes.variants import ITEM_SEPARATOR, parse_variant

logger = logging.getLogger("tune_care_tiny")

#: Share of the training rows held out for validation (whole query–answer components).
VALIDATION_SHARE = 0.1
#: Seed of the hold-out draw (fixed: every seed and every run of this script sees the same split).
SPLIT_SEED = 20261125
TINY_CONFIGS = ROOT / "configs" / "care_tiny"
#: Epochs per stage and document length of the dev-set runs (``configs/runs/care_toyhom.yaml``).
EPOCHS = 3
DOCUMENT_MAX_LENGTH = 192
#: The random-init "large" model is fully fine-tuned (no LoRA) in init_document and Stage II.
FULL_FINE_TUNE = ["init_document:model.lora=null", "stage2:model.lora=null"]
#: The recipe's stages shown beside the variants (report label -> row).
STAGE_ROWS = {"init_document": "symmetric large", "init_query": "symmetric small", "stage1": "after Stage I (no Stage II)"}


def tiny_settings(seed: int) -> list[str]:
    """Overrides of every tiny training here: seed, quiet logging, batch 32 without GradCache, epochs, length."""
    return [f"seed={seed}", "runtime.log_with=null", "runtime.progress_bar=false", "optim.batch_size=32",
            "optim.grad_cache_chunk_size=null", f"optim.epochs={EPOCHS}",
            f"model.document_max_seq_length={DOCUMENT_MAX_LENGTH}", *FULL_FINE_TUNE]


def training_file(data: Path, work: Path) -> Path:
    """The dev set's training rows with BM25-mined negatives from its corpus (once)."""
    from care.data.retrieval import load_corpus
    from care.data.training import TrainingExample, write_training_file
    from care.train.recipes.bm25_negatives import N_MINED_NEGATIVES, mine_negatives

    target = work / "train.jsonl"
    if not target.is_file():
        corpus = [d.text for d in load_corpus(data / "corpus.jsonl").values()]
        rows = [TrainingExample(r["query"], (r["positive"],)) for _, r in iter_jsonl(data / "train.jsonl")]
        write_training_file(target, mine_negatives(rows, corpus, n=N_MINED_NEGATIVES, seed=0))
    return target


def tiny_models(data: Path, work: Path, seed: int) -> Path:
    """The seed's character tokenizer and random-init tiny BERT / Qwen3 over the dev set's texts (built once)."""
    from care.data.retrieval import load_corpus
    from care.models.presets import make_tiny_models

    base = work / "tiny"
    if not (base / "tiny-qwen3").is_dir():
        texts = [d.text for d in load_corpus(data / "corpus.jsonl").values()]
        texts += [r["query"] for _, r in iter_jsonl(data / "train.jsonl")]
        make_tiny_models(texts, base, seed=seed)
    return base


def sweep_config(data: Path, train_file: Path, tiny: Path, seed: int, variants: dict[str, list[str]]) -> SweepConfig:
    """The seed's sweep: the tiny recipe on the dev set, the variants, the fixed validation split."""
    return SweepConfig.from_dict({
        "query_model": str(tiny / "tiny-bert"), "document_model": str(tiny / "tiny-qwen3"),
        "train_file": str(train_file), "corpus_file": str(data / "corpus.jsonl"), "config_dir": str(TINY_CONFIGS),
        "overrides": tiny_settings(seed), "variants": variants, "metric": "ndcg_at_10",
        "validation": {"share": VALIDATION_SHARE, "seed": SPLIT_SEED, "max_documents": None}})


def seed_rows(report: dict) -> dict[str, float]:
    """A sweep report's rows: the recipe's reference stages, the recipe itself (``recipe``) and each variant."""
    rows = {label: report["base_rows"][stage]["scores"]["ndcg_at_10"] for stage, label in STAGE_ROWS.items()
            if stage in report["base_rows"]}
    rows.update({("recipe" if name == BASE else name): row["scores"]["ndcg_at_10"]
                 for name, row in report["rows"].items()})
    return rows


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
    data = dev_set()
    args.work.mkdir(parents=True, exist_ok=True)
    train_file = training_file(data, args.work)
    scores_file = args.work / "validation_scores.json"  # every seed run so far (seeds may run separately)
    scores: dict[str, dict[str, float]] = json.loads(scores_file.read_text()) if scores_file.is_file() else {}
    for seed in args.seeds:
        out = args.work / f"seed{seed}"
        result = run_sweep(sweep_config(data, train_file, tiny_models(data, out, seed), seed, variants), output_dir=out)
        report = json.loads(result.report.read_text(encoding="utf-8"))
        for row, value in seed_rows(report).items():
            scores.setdefault(row, {})[str(seed)] = value
        write_json(scores_file, scores)
    rows = {row: {"seeds": [int(s) for s in sorted(v)], "ndcg_at_10": [v[s] for s in sorted(v)],
                  "mean": float(np.mean(list(v.values())))} for row, v in scores.items()}
    large = rows["symmetric large"]["mean"]
    split = {"held_out_share": VALIDATION_SHARE, "split_seed": SPLIT_SEED, "validation_queries": report["validation"][
        "held_out"], "training_rows": report["validation"]["training_rows"], "epochs": EPOCHS}
    lines = ["## toyhom validation split (train.jsonl hold-out) — nDCG@10", "",
             f"{split['validation_queries']} held-out queries (whole query–answer components) against the full corpus; "
             f"{split['training_rows']} training rows; {EPOCHS} epochs a stage unless a variant says otherwise. "
             "Variants: `care train sweep`'s grammar (see `python -m benchmarks.tune_care_tiny --help`).", "",
             "| model | nDCG@10 mean | seeds | per seed | / symmetric large |", "|---|---|---|---|---|"]
    for row, r in rows.items():
        lines.append(f"| {row} | {r['mean']:.4f} | {', '.join(map(str, r['seeds']))} | "
                     f"{', '.join(f'{x:.4f}' for x in r['ndcg_at_10'])} | {r['mean'] / large:.3f} |")
    candidates = {row: round(r["mean"], 4) for row, r in rows.items() if row != "symmetric large"}
    best = max(candidates, key=lambda k: candidates[k])
    choice = Selection("tiny CARE's recipe (configs/care_tiny)", VALIDATION, best, candidates,
                       metric="ndcg_at_10 (mean over the seeds run)")
    save("care_validation", "toyhom", config={"split": split, "variants": variants},
         seeds=sorted({s for r in rows.values() for s in r["seeds"]}), scores=rows, markdown="\n".join(lines),
         results=args.results, extra=add_selections({}, [choice]))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
