"""Choose tiny CARE's Stage I / Stage II settings on a validation split carved from the dev set's train file.

``bench_care.py`` reports the test split; settings must not be picked there. This script holds out
whole answer groups of ``train.jsonl`` (a held-out query's answer is never a training positive, as
in the real train/test split), trains the tiny recipe on the rest, and scores Stage I / Stage II variants on
the held-out queries against the FULL corpus (nDCG@10), next to the recipe's own reference points:
symmetric large (the target) and the Stage I model (Stage II's starting point).

A variant is ``NAME=STAGE[@FROM][:OVERRIDE,...]``: STAGE is ``stage1`` (query alignment from the
initialised query encoder; the override ``alignment=rich`` trains it on the training queries plus
short corpus sentences and every corpus passage instead of the training file's texts), ``stage2``
(joint) or ``sft`` (query side alone against the frozen document tower); ``@FROM`` starts the query
side from an earlier stage1 variant instead of the recipe's Stage I. Overrides apply to that
stage's ``care_tiny`` config on top of ``bench_care``'s settings. Every training and score is
resumable (kept under ``--work``). Outputs ``benchmarks/results/care_validation/toyhom.{json,md}``.

Usage::

    python -m benchmarks.tune_care_tiny --seeds 0 --threads 2 \\
        --variant recipe=stage2 --variant doclr=stage2:optim.document_lr=1e-4 \
        --variant s1rich=stage1:alignment=rich --variant s1rich_s2=stage2@s1rich
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

from benchmarks._common import ROOT, RUNS, dev_set
from benchmarks.bench_datasets import Dataset
from benchmarks.bench_results import save
from care.bench.options import RunOptions
from care.bench.runner import evaluate
from care.encoders.registry import load_model
from care.train.config import TrainConfig, apply_overrides, load_config

from care.bench.registry import infer_task
from care.bench.task import TaskMetadata
from care.data.splits import hold_out_by_positive, positive_of, write_validation_task
from care.data.io import iter_jsonl, write_json, write_jsonl
from care.data.retrieval import load_corpus
from care.train.mining import N_MINED_NEGATIVES, mine_negatives
from care.encoders.cache import EmbeddingCache
from care.models.instructions import instruction_for_task
from care.train.recipe import RecipePaths, run_recipe
from care.train.validation import ValidationConfig
from care.train.trainer import read_result, train

logger = logging.getLogger("tune_care_tiny")

#: Share of the training queries held out for validation (whole answer groups).
VALIDATION_SHARE = 0.1
#: Seed of the hold-out draw (fixed: every run of this script sees the same split).
SPLIT_SEED = 20261125
TINY_CONFIGS = ROOT / "configs" / "care_tiny"
#: Epochs per stage and document length of the dev-set runs (``configs/runs/care_toyhom.yaml``).
EPOCHS = 3
DOCUMENT_MAX_LENGTH = 192
#: Variant stages and the ``care_tiny`` config each starts from.
STAGES = {"stage1": "stage1", "stage2": "stage2", "sft": "stage1_sft"}


def tiny_stage_config(stage: str, out: Path, seed: int, settings: list[str]) -> TrainConfig:
    data = load_config(TINY_CONFIGS / f"{stage}.yaml").to_dict()
    data = apply_overrides(data, [f"output_dir={out}", f"seed={seed}", "runtime.log_with=null",
                                  "runtime.progress_bar=false", *settings])
    return TrainConfig.from_dict(data)


#: The random-init "large" model is fully fine-tuned (see the module docstring).
FULL_FINE_TUNE = ["model.lora=null"]


def tiny_settings(seed: int, extra: list[str]) -> list[str]:
    """Overrides every tiny training here shares: seed, quiet logging, batch 32 without GradCache, ``extra``."""
    return [f"seed={seed}", "runtime.log_with=null", "runtime.progress_bar=false", "optim.batch_size=32",
            "optim.grad_cache_chunk_size=null", *extra]


def tiny_models(ds: Dataset, work: Path, seed: int) -> Path:
    """The seed's character tokenizer and random-init tiny BERT / Qwen3 (built once) under ``work/tiny``."""
    from care.models.presets import make_tiny_models

    base = work / "tiny"
    if not (base / "tiny-qwen3").is_dir():
        make_tiny_models(ds.tokenizer_texts, base, seed=seed)
    return base


def finished(folder: Path) -> bool:
    """True when the training stage in ``folder`` completed (its ``train_result.json`` says so)."""
    result = read_result(folder)
    return bool(result and result.completed)


def evaluate_variants(ds: Dataset, specs: dict[str, str], work: Path, cache: EmbeddingCache) -> dict[str, float]:
    """nDCG@10 of every variant (read back when already computed)."""

    out: dict[str, float] = {}
    results_dir = work / "results"
    for variant, spec in specs.items():
        path = results_dir / f"{variant.replace(' ', '_').replace('/', '-').replace(',', '').replace(':', '')}.json"
        if path.is_file():
            out[variant] = json.loads(path.read_text())["ndcg_at_10"]
            continue
        result = evaluate(load_model(spec), ds.task, RunOptions(cache=cache, show_progress=False), label=variant)
        write_json(path, result.scores)
        out[variant] = result.scores["ndcg_at_10"]
        logger.info("%s / %s: nDCG@10 %.4f", ds.name, variant, out[variant])
    return out


def carve_validation(work: Path) -> Dataset:
    """Split ``train.jsonl`` into training rows and a validation task over the full corpus."""
    toyhom = dev_set()
    corpus_texts = [d.text for d in load_corpus(toyhom / "corpus.jsonl").values()]
    rows = [obj for _, obj in iter_jsonl(toyhom / "train.jsonl")]
    kept, held = hold_out_by_positive(rows, VALIDATION_SHARE, SPLIT_SEED)  # whole answer groups
    folder = work / "validation_task"
    train_file = work / "train.jsonl"
    if not train_file.is_file():
        write_jsonl(train_file, mine_negatives(kept, corpus_texts, n=N_MINED_NEGATIVES, seed=0))
        write_validation_task(held, toyhom / "corpus.jsonl", folder)
    logger.info("validation split: %d held-out answer groups, %d queries; training rows in %s",
                len({positive_of(r) for r in held}), len(held), train_file)
    task = TaskMetadata.from_dict({**infer_task(folder).to_dict(), "name": "toyhom-validation",
                                   "path": str(folder), "instruction": instruction_for_task("CMedTEB-Retrieval")})
    queries = [r["query"] for _, r in iter_jsonl(train_file)]
    return Dataset("toyhom-validation", train_file, task, corpus_texts + queries, queries, corpus_texts,
                   toyhom / "corpus.jsonl")


def parse_variant(text: str) -> tuple[str, str, str | None, list[str]]:
    """``NAME=STAGE[@FROM][:OVERRIDES]`` -> (name, stage, from-variant, overrides)."""
    name, _, rest = text.partition("=")
    head, _, overrides = rest.partition(":")
    stage, _, start = head.partition("@")
    if not name or stage not in STAGES:
        raise SystemExit(f"--variant {text!r}: write NAME=STAGE[@FROM][:KEY=VALUE,...] with STAGE one of {', '.join(STAGES)}")
    if stage == "stage1" and start:
        raise SystemExit(f"--variant {text!r}: Stage I always starts from the initialised query encoder; drop @{start}")
    return name, stage, start or None, [o for o in overrides.split(",") if o]


def rich_alignment(ds: Dataset, work: Path) -> Path:
    """Stage I data from more unlabeled in-domain text: the training queries plus short corpus
    sentences on the query side, every corpus passage on the document side."""
    from care.train.alignment import build_alignment_data, document_sentences

    out = work / "alignment_rich.jsonl"
    if not out.is_file():
        queries = ds.alignment_queries + document_sentences(ds.alignment_documents, seed=0)
        write_jsonl(out, build_alignment_data(queries, ds.alignment_documents, seed=0))
    return out


def run_seed(ds: Dataset, work: Path, seed: int, variants: list[str]) -> dict[str, str]:
    """Train the recipe and each variant for one seed; ``{row: model spec}``."""
    base = tiny_models(ds, work, seed)
    common = tiny_settings(seed, [f"optim.epochs={EPOCHS}", f"model.document_max_seq_length={DOCUMENT_MAX_LENGTH}"])
    recipe = work / "recipe"
    run_recipe(RecipePaths(str(base / "tiny-bert"), str(base / "tiny-qwen3"), str(ds.train_file), str(recipe)),
               config_dir=TINY_CONFIGS, overrides=[*common, *(f"init_document:{o}" for o in FULL_FINE_TUNE)],
               stages=("init_query", "init_document", "stage1"),
               validation=ValidationConfig(enabled=False))  # tuned on its own validation split
    specs = {"symmetric large": str(recipe / "init_document" / "document"),
             "after Stage I (no Stage II)": str(recipe / "stage1" / "model")}
    document = f"model.document_model={recipe / 'init_document' / 'document'}"
    for text in variants:
        name, stage, start, overrides = parse_variant(text)
        out = work / "variants" / name
        if stage == "stage1":
            query = recipe / "init_query" / "query"
            data = rich_alignment(ds, work.parent) if "alignment=rich" in overrides else recipe / "alignment.jsonl"
            overrides = [o for o in overrides if o != "alignment=rich"]
        else:
            query = (work / "variants" / start if start else recipe / "stage1") / "query"
            data = ds.train_file
        wiring = [f"data.train_file={data}"]
        if not finished(out):
            extra = FULL_FINE_TUNE if stage == "stage2" else []
            train(tiny_stage_config(STAGES[stage], out, seed, [*common[1:], *extra, f"model.query_model={query}", document,
                                                     *wiring, *overrides]), resume=True)
        specs[text] = str(out / "model")
    return specs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variant", action="append", default=[], help="NAME=STAGE[@FROM][:KEY=VALUE,...] (see the module docstring); repeatable")
    parser.add_argument("--work", type=Path, default=RUNS / "tune_care_tiny")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    args.work.mkdir(parents=True, exist_ok=True)
    ds = carve_validation(args.work)
    cache = EmbeddingCache(args.work / "embedding_cache")
    # scores of every run so far (seeds may be run separately, with different variant lists)
    scores_file = args.work / "validation_scores.json"
    scores: dict[str, dict[str, float]] = json.loads(scores_file.read_text()) if scores_file.is_file() else {}
    for seed in args.seeds:
        seed_dir = args.work / f"seed{seed}"
        for row, value in evaluate_variants(ds, run_seed(ds, seed_dir, seed, args.variant), seed_dir, cache).items():
            scores.setdefault(row, {})[str(seed)] = value
        write_json(scores_file, scores)
    rows = {row: {"seeds": [int(s) for s in sorted(v)], "ndcg_at_10": [v[s] for s in sorted(v)],
                  "mean": float(np.mean(list(v.values())))} for row, v in scores.items()}
    large = rows["symmetric large"]["mean"]
    summary = {"split": {"held_out_share": VALIDATION_SHARE, "split_seed": SPLIT_SEED,
                         "validation_queries": sum(1 for _ in iter_jsonl(Path(ds.task.path) / "queries.jsonl")),
                         "training_rows": sum(1 for _ in iter_jsonl(ds.train_file)), "epochs": EPOCHS},
               "rows": rows}
    lines = ["## toyhom validation split (train.jsonl hold-out) — nDCG@10", "",
             f"{summary['split']['validation_queries']} held-out queries (whole answer groups) against the full corpus; "
             f"{summary['split']['training_rows']} training rows; {EPOCHS} epochs a stage unless a variant says otherwise. "
             "Variants: `NAME=STAGE[@FROM][:overrides]` (see `python -m benchmarks.tune_care_tiny --help`).", "",
             "| model | nDCG@10 mean | seeds | per seed | / symmetric large |", "|---|---|---|---|---|"]
    for row, r in rows.items():
        lines.append(f"| {row} | {r['mean']:.4f} | {', '.join(map(str, r['seeds']))} | "
                     f"{', '.join(f'{x:.4f}' for x in r['ndcg_at_10'])} | {r['mean'] / large:.3f} |")
    save("care_validation", "toyhom", config={"split": summary["split"], "variants": args.variant},
         seeds=sorted({s for r in rows.values() for s in r["seeds"]}), scores=rows, markdown="\n".join(lines))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
