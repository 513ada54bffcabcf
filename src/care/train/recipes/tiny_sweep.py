"""Tiny CARE's settings chosen on a validation split of the dev set's train file (``benchmarks/tune_care_tiny.py``).

Per seed, :func:`sweep_seeds` runs ``care train sweep`` (:func:`care.train.recipes.sweep.run_sweep`) on the dev
set: the tiny recipe (``configs/care_tiny``, random-init tiny BERT / Qwen3 built from the dev set's texts:
:func:`tiny_models`) and its variants, trained on ``train.jsonl`` with BM25-mined negatives (:func:`training_file`)
minus a validation split of whole query–answer components (:data:`VALIDATION_SHARE`, :data:`SPLIT_SEED`), scored on
the held-out queries against the full corpus (nDCG@10) next to the recipe's own stages (:data:`STAGE_ROWS`). The
scores of every seed run so far are kept in ``<work>/validation_scores.json`` (seeds may run separately);
:func:`summarise` averages them, :func:`markdown` writes the table and :func:`choice` the selection (made on
validation, never on test).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from care.bench.locations import CONFIGS
from care.bench.selection import VALIDATION, Selection
from care.data.io import iter_jsonl, write_json
from care.train.recipes.sweep import BASE, SweepConfig, run_sweep

logger = logging.getLogger(__name__)

#: Share of the training rows held out for validation (whole query–answer components).
VALIDATION_SHARE = 0.1
#: Seed of the hold-out draw (fixed: every seed and every run sees the same split).
SPLIT_SEED = 20261125
TINY_CONFIGS = CONFIGS / "care_tiny"
#: Epochs per stage and document length of the dev-set runs (``configs/runs/care_toyhom.yaml``).
EPOCHS = 3
DOCUMENT_MAX_LENGTH = 192
#: The recipe's stages shown beside the variants (report label -> row).
STAGE_ROWS = {"init_document": "symmetric large", "init_query": "symmetric small", "stage1": "after Stage I (no Stage II)"}
#: The row every other is divided by (the symmetric target).
REFERENCE_ROW = "symmetric large"
#: The metric the sweep ranks by and the table shows.
METRIC = "ndcg_at_10"
#: The file under ``--work`` holding every seed's row scores.
SCORES_FILE = "validation_scores.json"


def training_file(data: Path, work: Path) -> Path:
    """The dev set's training rows with BM25-mined negatives from its corpus (written once to ``work``)."""
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


def sweep_config(data: Path, train_file: Path, tiny: Path, overrides: Sequence[str],
                 variants: dict[str, list[str]]) -> SweepConfig:
    """A seed's sweep: the tiny recipe on the dev set with the user's ``overrides`` (sweep syntax), the variants,
    the fixed validation split."""
    return SweepConfig.from_dict({
        "query_model": str(tiny / "tiny-bert"), "document_model": str(tiny / "tiny-qwen3"),
        "train_file": str(train_file), "corpus_file": str(data / "corpus.jsonl"), "config_dir": str(TINY_CONFIGS),
        "overrides": list(overrides), "variants": variants, "metric": METRIC,
        "validation": {"share": VALIDATION_SHARE, "seed": SPLIT_SEED, "max_documents": None}})


def seed_rows(report: dict) -> dict[str, float]:
    """A sweep report's rows: the recipe's reference stages, the recipe itself (``recipe``) and each variant."""
    rows = {label: report["base_rows"][stage]["scores"][METRIC] for stage, label in STAGE_ROWS.items()
            if stage in report["base_rows"]}
    rows.update({("recipe" if name == BASE else name): row["scores"][METRIC] for name, row in report["rows"].items()})
    return rows


def sweep_seeds(data: Path, work: Path, seeds: Sequence[int], variants: dict[str, list[str]],
                overrides_of: Callable[[int], Sequence[str]]) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Sweep each seed under ``work/seed<k>`` (resumable) with ``overrides_of(seed)``; returns the scores of every
    seed run so far (``{row: {seed: nDCG@10}}``, kept in ``work/validation_scores.json``) and the last report."""
    work.mkdir(parents=True, exist_ok=True)
    train_file = training_file(data, work)
    scores_file = work / SCORES_FILE
    scores: dict[str, dict[str, float]] = json.loads(scores_file.read_text()) if scores_file.is_file() else {}
    report: dict[str, Any] = {}
    for seed in seeds:
        out = work / f"seed{seed}"
        config = sweep_config(data, train_file, tiny_models(data, out, seed), overrides_of(seed), variants)
        report = json.loads(run_sweep(config, output_dir=out).report.read_text(encoding="utf-8"))
        for row, value in seed_rows(report).items():
            scores.setdefault(row, {})[str(seed)] = value
        write_json(scores_file, scores)
    return scores, report


def summarise(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """``{row: {"seeds", "ndcg_at_10" (per seed, seed order), "mean"}}`` of :func:`sweep_seeds`' scores."""
    return {row: {"seeds": [int(s) for s in sorted(v)], METRIC: [v[s] for s in sorted(v)],
                  "mean": float(np.mean(list(v.values())))} for row, v in scores.items()}


def split_summary(report: dict[str, Any]) -> dict[str, Any]:
    """The validation split a sweep report held out, as the record keeps it."""
    return {"held_out_share": VALIDATION_SHARE, "split_seed": SPLIT_SEED,
            "validation_queries": report["validation"]["held_out"],
            "training_rows": report["validation"]["training_rows"], "epochs": EPOCHS}


def markdown(rows: dict[str, dict[str, Any]], split: dict[str, Any], driver: str) -> list[str]:
    """The table: each row's mean, seeds, per-seed scores and ratio to :data:`REFERENCE_ROW`."""
    large = rows[REFERENCE_ROW]["mean"]
    lines = ["## toyhom validation split (train.jsonl hold-out) — nDCG@10", "",
             f"{split['validation_queries']} held-out queries (whole query–answer components) against the full corpus; "
             f"{split['training_rows']} training rows; {EPOCHS} epochs a stage unless a variant says otherwise. "
             f"Variants: `care train sweep`'s grammar (see `python -m {driver} --help`).", "",
             "| model | nDCG@10 mean | seeds | per seed | / symmetric large |", "|---|---|---|---|---|"]
    for row, r in rows.items():
        lines.append(f"| {row} | {r['mean']:.4f} | {', '.join(map(str, r['seeds']))} | "
                     f"{', '.join(f'{x:.4f}' for x in r[METRIC])} | {r['mean'] / large:.3f} |")
    return lines


def choice(rows: dict[str, dict[str, Any]]) -> Selection:
    """The recipe or variant with the best mean validation score (the reference row is not a candidate)."""
    candidates = {row: round(r["mean"], 4) for row, r in rows.items() if row != REFERENCE_ROW}
    best = max(candidates, key=lambda k: candidates[k])
    return Selection("tiny CARE's recipe (configs/care_tiny)", VALIDATION, best, candidates,
                     metric="ndcg_at_10 (mean over the seeds run)")
