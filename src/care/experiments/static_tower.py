"""The static query tower's test read (issue 59): ``care run`` per dev set and seed, against symmetric large's score.

Per dev set and seed, :func:`run_static_seed` runs the pipeline (:func:`care.pipeline.run.run_pipeline`) on the
dev set's static-tower run config (:data:`CONFIGS`: ``models.query: "e5?layers=0"`` on frozen e5, the recipe's
Stage I, ``recipes.care.stages: [stage1]``, with the alignment text and rate the validation screen chose:
``benchmarks/results/static_tower/<dataset>_screen_validation_full.json``; a config may go on with Stage II run as
``stage1_sft``, the static tower alone against the frozen e5's answers) into ``<work>/<dataset>/seed<k>``
(resumable; the seeds share one cache, so the corpus and the teacher's texts are encoded once). :func:`summarise`
reports the static tower's row that validation ranks first (:func:`chosen_row`; every row's test score stays in the
record) and records its main-task nDCG@10 per seed beside symmetric large's of the same seed, read from the
transfer record (``benchmarks/results/transfer/<dataset>.json``, ``care run configs/runs/care_<dataset>.yaml``), each
seed's ratio, the ratio of means and the issue's target (≥ :data:`TARGET_SHARE` of symmetric large on every seed).

Inputs: a dev set name, seeds, a work folder. Outputs: :class:`~care.bench.record.BenchmarkRecord`
``static_tower/<dataset>_test``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from care.bench.locations import RESULTS, ROOT, portable
from care.bench.record import BenchmarkRecord
from care.bench.tables import per_seed_ratios
from care.config import ConfigError

EXPERIMENT = "static_tower"
#: The dev sets and their static-tower run configs.
CONFIGS = {"kuake_qtr": ROOT / "configs" / "runs" / "static_kuake_qtr.yaml",
           "toyhom": ROOT / "configs" / "runs" / "static_toyhom.yaml",
           "toyhom_large": ROOT / "configs" / "runs" / "static_toyhom_large.yaml"}
#: A config that is a variant of a dev set's read: the dev set whose transfer record and screen it uses.
DEV_SET_OF = {"toyhom_large": "toyhom"}
#: Recipe stages whose model is the static tower (its rows; ``init_document`` is symmetric large's).
STATIC_ROW_STAGES = ("stage1", "stage1_rank", "stage2")
#: The reference row, as the transfer records name it, and the experiment that holds it.
REFERENCE, REFERENCE_EXPERIMENT = "symmetric large", "transfer"
#: The validation screen's record whose choice the run configs apply: ``static_tower/<dataset><suffix>``.
SCREEN_SUFFIX = "_screen_validation_full"
#: Issue 59's target: the static tower at this share of symmetric large's test nDCG@10 on each dev set.
TARGET_SHARE = 0.90


def run_config(dataset: str) -> Path:
    """The static-tower run config of ``dataset`` (a key of :data:`CONFIGS`)."""
    if dataset not in CONFIGS:
        raise ConfigError(f"dataset {dataset!r}: choose from {', '.join(sorted(CONFIGS))}")
    return CONFIGS[dataset]


def static_labels(dataset: str) -> list[str]:
    """The static tower's row labels in the config's stage order: one per stage it trains (``recipes.care.stages``;
    a Stage II run as ``stage1_sft`` is a row of the same static tower, trained further)."""
    from care.pipeline.config import load_run_config

    care = load_run_config(run_config(dataset)).recipes.care
    return [care.labels[stage] for stage in care.stages if stage in care.labels and stage in STATIC_ROW_STAGES]


def dev_set(dataset: str) -> str:
    """The dev set of ``dataset`` (a key of :data:`CONFIGS`): itself, or the one a variant reads (:data:`DEV_SET_OF`)."""
    return DEV_SET_OF.get(dataset, dataset)


def static_label(dataset: str) -> str:
    """The static tower's first row (its Stage I)."""
    return static_labels(dataset)[0]


def chosen_row(labels: Sequence[str], scores: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The row to report among ``labels``: the best mean nDCG@10 over the seeds on the validation split
    (``<row> (validation)`` in ``scores``; a tie goes to the row listed first), and that choice as a selection-protocol
    block (``None`` with one row: nothing was chosen)."""
    from care.bench.selection import VALIDATION, Selection
    from care.experiments.transfer import VALIDATION_SUFFIX

    if len(labels) == 1:
        return labels[0], None
    missing = [row for row in labels if row + VALIDATION_SUFFIX not in scores]
    if missing:
        raise ConfigError(f"no validation score of {', '.join(missing)}: the run config must keep its validation "
                          "split (validation.enabled) to choose among the static tower's rows")
    candidates = {row: round(scores[row + VALIDATION_SUFFIX]["mean"], 4) for row in labels}
    chosen = max(labels, key=lambda row: (candidates[row], -labels.index(row)))
    return chosen, Selection("the static tower's reported row (Stage I alone, or trained further)", VALIDATION, chosen,
                             candidates, metric="ndcg_at_10", note="mean over the seeds of each row's nDCG@10 on the "
                             "validation split care run carves from train.jsonl (one split for every seed)").to_dict()


def run_static_seed(dataset: str, seed: int, work: Path, *, overrides: Sequence[str] = (),
                    allow_dirty: bool = False) -> dict[str, Any]:
    """One seed's ``care run`` under ``work/<dataset>/seed<seed>`` (the seeds' shared cache in
    ``work/<dataset>/cache``; ``overrides``: the user's ``KEY=VALUE`` items, e.g. the data's location): its main task,
    rows, step wall times and the Stage I training time (:func:`care.experiments.transfer.run_config_seed`)."""
    from care.experiments.transfer import run_config_seed

    run = run_config_seed(run_config(dataset), seed, work / dataset, list(overrides), allow_dirty=allow_dirty)
    return {key: run[key] for key in ("main_task", "rows", "step_seconds", "stage_train_seconds", "commit")}


def reference_scores(dataset: str, results: Path = RESULTS) -> dict[str, Any]:
    """Symmetric large's test nDCG@10 per seed (``{"per_seed", "seeds", "mean"}``) from the transfer record."""
    dataset = dev_set(dataset)
    path = results / REFERENCE_EXPERIMENT / f"{dataset}.json"
    if not path.is_file():
        raise ConfigError(f"{path}: no transfer record of {dataset}; run benchmarks/bench_transfer.py --dataset "
                          f"{dataset} first (symmetric large's per-seed test scores)")
    scores = json.loads(path.read_text(encoding="utf-8"))["scores"]
    if REFERENCE not in scores:
        raise ConfigError(f"{path}: no row {REFERENCE!r} in its scores")
    return scores[REFERENCE]


def screen_selections(dataset: str, results: Path = RESULTS) -> list[dict[str, Any]]:
    """The validation screen's choices the run config applies (``static_tower/<dataset>_screen_validation_full``),
    each naming that record; ``[]`` without it."""
    from care.bench.selection import read_selections

    name = f"{EXPERIMENT}/{dev_set(dataset)}{SCREEN_SUFFIX}"
    path = results / f"{name}.json"
    if not path.is_file():
        return []
    extra = json.loads(path.read_text(encoding="utf-8"))["extra"]
    return [replace(s, record=name).to_dict() for s in read_selections(extra, str(path))]


def summarise(dataset: str, runs: dict[int, dict[str, Any]], reference: dict[str, Any],
              selections: list[dict[str, Any]] | None = None, overrides: Sequence[str] = ()) -> BenchmarkRecord:
    """The record over ``runs`` (``{seed: run_static_seed's dict}``): every row's main-task nDCG@10 per seed, mean
    and std; symmetric large's of the same seeds (``reference``); the reported static row (:func:`chosen_row`, chosen
    on validation), its ratio to symmetric large per seed, the ratio of means and whether every seed reaches
    :data:`TARGET_SHARE`; ``selections``: how the config's setting was chosen (:func:`screen_selections`), and the
    reported row's choice."""
    from care.bench.selection import TEST
    from care.experiments.transfer import VALIDATION_SUFFIX, row_scores

    seeds = sorted(runs)
    scores: dict[str, Any] = {row: score for row, score in row_scores(runs).items()  # main task only
                              if not row.endswith(VALIDATION_SUFFIX)}
    own = dict(zip(reference["seeds"], reference["per_seed"], strict=True))
    matched = [seed for seed in seeds if seed in own]
    scores[f"{REFERENCE} ({REFERENCE_EXPERIMENT} record)"] = {
        "per_seed": [own[s] for s in matched], "seeds": matched,
        "mean": statistics.mean(own[s] for s in matched) if matched else None}
    label, choice = chosen_row(static_labels(dataset), row_scores(runs))
    ratios = per_seed_ratios(scores.get(label), scores[f"{REFERENCE} ({REFERENCE_EXPERIMENT} record)"])
    static_mean = scores[label]["mean"] if label in scores else None
    reference_mean = scores[f"{REFERENCE} ({REFERENCE_EXPERIMENT} record)"]["mean"]
    targets = {f"{label} / {REFERENCE} per seed": {str(seed): round(r, 4) for seed, r in ratios.items()},
               f"{label} / {REFERENCE} (ratio of means)": round(static_mean / reference_mean, 4)
               if static_mean and reference_mean else None,
               f"every seed >= {TARGET_SHARE:.0%} of {REFERENCE}": bool(ratios) and all(
                   r >= TARGET_SHARE for r in ratios.values())}
    return BenchmarkRecord(EXPERIMENT, f"{dataset}_test", seeds=seeds, scores=scores, latencies={},
                           config={"run_config": str(run_config(dataset).relative_to(ROOT)), "split": TEST,
                                   "overrides": portable(list(overrides)),
                                   "reference": f"{REFERENCE}: benchmarks/results/{REFERENCE_EXPERIMENT}/{dev_set(dataset)}.json "
                                                "(care run configs/runs/care_<dataset>.yaml, the same seeds)"},
                           extra={"targets": targets, "reported_row": label,
                                  "selection": list(selections or []) + ([choice] if choice else []),
                                  "per_seed": portable({seed: {k: v for k, v in run.items() if k != "rows"}
                                                        for seed, run in runs.items()})})
