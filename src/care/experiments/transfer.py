"""Does CARE keep its gain on data it was not tuned on? ``care run`` per dev set and seed, summarised over seeds.

Per dev set and seed, :func:`run_seed` runs the pipeline (:func:`care.pipeline.run.run_pipeline`) on the dev set's
shipped run config (:data:`CONFIGS`) into ``<work>/<record name>/seed<k>`` (resumable) and returns what the record
keeps of it; :func:`summarise` records, over seeds, every row's nDCG@10 on the main task and on the validation split,
the step and stage wall times and issue 43's targets (CARE ≥ 97 % of symmetric large, ≥ symmetric small + 0.02,
≥ e5 zero-shot); :func:`recorded_runs` gives a record's seeds back, so a later seed joins them without the run
folders. :func:`without_stored_prompts` scores two finished rows as ``care run`` queried them before model folders
carried their prefixes. The record's table is :func:`care.bench.reports.transfer.record_markdown`.

Inputs: a :class:`TransferConfig` (the dev set, the user's ``--set`` items, the query-latency budget). Outputs:
:class:`~care.bench.record.BenchmarkRecord` ``transfer/<dataset>[_speedup<X>]``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.bench.locations import ROOT, portable
from care.bench.record import BenchmarkRecord
from care.bench.reports.transfer import EXPERIMENT, TARGETS_KEY
from care.bench.selection import SELECTION_KEY, SPEED, Selection
from care.bench.tables import per_seed_ratios
from care.config import Config, ConfigError
from care.pipeline.config import load_run_config
from care.pipeline.query_budget import OUTPUT_KEY as QUERY_BUDGET_KEY
from care.pipeline.run import run_pipeline
from care.pipeline.sources import VALIDATION_TASK

#: The dev sets and their shipped run configs.
CONFIGS = {"toyhom": ROOT / "configs" / "runs" / "care_toyhom_e5.yaml",
           "kuake_qtr": ROOT / "configs" / "runs" / "care_kuake_qtr.yaml"}
#: Row labels (as the configs name them) the targets read.
E5, SYM_SMALL, SYM_LARGE, CARE = "e5 zero-shot", "symmetric small", "symmetric large", "CARE"
ROWS = (E5, SYM_SMALL, SYM_LARGE, CARE)
#: Issue 43's targets: CARE / symmetric large, CARE - symmetric small.
TARGET_RATIO, TARGET_MARGIN = 0.97, 0.02
#: The run config field the query-latency budget sets (``--query-speedup``).
QUERY_SPEEDUP_KEY = "recipes.care.query_speedup"
#: Suffix of a row's validation-split scores in the record.
VALIDATION_SUFFIX = " (validation)"


@dataclass
class TransferConfig(Config):
    """One transfer experiment.

    Attributes:
        dataset: a key of :data:`CONFIGS` (``toyhom``, ``kuake_qtr``).
        overrides: the user's ``KEY=VALUE`` items for the run config (``--set``), as given.
        query_speedup: a query-latency budget (``recipes.care.query_speedup``); ``None``: the config's tower.
    """

    dataset: str = "kuake_qtr"
    overrides: list[str] = field(default_factory=list)
    query_speedup: float | None = None

    def validate(self) -> None:
        if self.dataset not in CONFIGS:
            raise ConfigError(f"field 'dataset': {self.dataset!r}; choose from {', '.join(sorted(CONFIGS))}")
        if self.query_speedup is not None and self.query_speedup <= 0:
            raise ConfigError(f"field 'query_speedup': {self.query_speedup}; give a speed-up above 0, e.g. 5")

    @property
    def run_config(self) -> Path:
        return CONFIGS[self.dataset]

    @property
    def record_name(self) -> str:
        """The record (and work folder) name: the dataset, ``_speedup<X>`` with a budget."""
        return self.dataset + (f"_speedup{self.query_speedup:g}" if self.query_speedup else "")

    def run_overrides(self) -> list[Any]:
        """The overrides of the run config: the user's text items, then the budget as a typed pair (the value
        as its text ``{:g}`` reads: ``5`` an int)."""
        if not self.query_speedup:
            return list(self.overrides)
        value = int(self.query_speedup) if float(self.query_speedup).is_integer() else self.query_speedup
        return [*self.overrides, (QUERY_SPEEDUP_KEY, value)]

    def shown_overrides(self) -> list[str]:
        """The overrides as the record shows them (``--set`` items, then the budget's line)."""
        speedup = [f"{QUERY_SPEEDUP_KEY}={self.query_speedup:g}"] if self.query_speedup else []
        return [*self.overrides, *speedup]


def run_seed(config: TransferConfig, seed: int, work: Path, *, allow_dirty: bool = False) -> dict[str, Any]:
    """One seed's ``care run`` under ``work/<record name>/seed<seed>``: its results, the validation checks, the
    query budget's pick and the wall times of steps and stages."""
    run = run_config_seed(config.run_config, seed, work / config.record_name, config.run_overrides(),
                          allow_dirty=allow_dirty)
    return {**run, "overrides": list(config.overrides)}


def run_config_seed(run_config: Path, seed: int, folder: Path, overrides: Sequence[Any] = (), *,
                    allow_dirty: bool = False) -> dict[str, Any]:
    """``care run run_config`` with ``seed`` under ``folder/seed<seed>`` (the seeds' shared cache in ``folder/cache``;
    ``overrides``: ``KEY=VALUE`` items or typed pairs): its main task, rows, index, the validation checks, the query
    budget's pick, the wall times of steps and stages, the commit it ran and the manifest's code entries."""
    typed = [("seed", seed), ("cache_dir", str(folder / "cache")), ("show_progress", False), *overrides]
    report = run_pipeline(load_run_config(run_config, typed), folder / f"seed{seed}", allow_dirty=allow_dirty)
    results = json.loads((report.output / "results.json").read_text(encoding="utf-8"))
    manifest = json.loads((report.output / "manifest.json").read_text(encoding="utf-8"))
    stage_seconds = {}
    for stage_dir in sorted((report.output / "models" / "care").glob("*/train_result.json")):
        stage_seconds[stage_dir.parent.name] = json.loads(stage_dir.read_text(encoding="utf-8")).get("train_seconds")
    outputs = manifest["steps"]["train_care"]["outputs"]
    return {"main_task": results["main_task"], "rows": results["rows"], "index": results.get("index"),
            "validation": outputs.get("validation", {}), "query_budget": outputs.get(QUERY_BUDGET_KEY),
            "step_seconds": {name: step.get("seconds") for name, step in manifest["steps"].items()},
            "stage_train_seconds": stage_seconds, "commit": run_commit(manifest), "code": manifest.get("code", [])}


def run_commit(manifest: dict[str, Any]) -> str:
    """The commit a run's manifest pinned when it started (its last start's: the code that finished it), or
    ``"unknown"`` for a run folder older than the pin."""
    code = manifest.get("code") or []
    return code[-1]["commit"] if code else "unknown"


def recorded_runs(record: BenchmarkRecord, dataset: str) -> dict[int, dict[str, Any]]:
    """The per-seed runs a record of :func:`summarise` holds, rebuilt as :func:`run_seed` returns them (each row's
    main-task and validation nDCG@10 from ``scores``; the rest from ``extra.per_seed``; a seed recorded before
    seeds carried their overrides and commit takes the record's); ``{}`` for a record of another run config."""
    if record.config.get("run_config") != str(CONFIGS[dataset].relative_to(ROOT)):
        return {}
    runs: dict[int, dict[str, Any]] = {}
    for key, run in record.extra.get("per_seed", {}).items():
        seed = int(key)
        rows = []
        for label, entry in record.scores.items():
            if label.endswith(VALIDATION_SUFFIX) or seed not in entry["seeds"]:
                continue
            row_scores = {run["main_task"]: entry["per_seed"][entry["seeds"].index(seed)]}
            val = record.scores.get(f"{label}{VALIDATION_SUFFIX}")
            if val and seed in val["seeds"]:
                row_scores[VALIDATION_TASK] = val["per_seed"][val["seeds"].index(seed)]
            rows.append({"model": label, "scores": row_scores})
        runs[seed] = {"overrides": list(record.config.get("overrides", [])), "commit": record.commit, **run, "rows": rows}
    return runs


def without_stored_prompts(config: TransferConfig, seed: int, work: Path) -> BenchmarkRecord:
    """What the e5-trained rows score when queried as ``care run`` queried them before folders carried their
    prefixes (:mod:`care.encoders.stored_prompts`): each row's folder, linked without ``care_prompts.json`` and
    scored with no spec options — CARE's routed folder then applies the CMedTEB instruction to queries, the plain
    towers no prefix at all — beside the same folder as trained. Record ``<dataset>_without_stored_prompts``."""
    from care.bench.options import RunOptions
    from care.bench.runner import evaluate
    from care.encoders.cache import EmbeddingCache
    from care.encoders.registry import load_model
    from care.encoders.stored_prompts import PROMPTS_FILE
    from care.pipeline.context import RunContext
    from care.pipeline.sources import main_task

    run = work / config.dataset / f"seed{seed}"
    task = main_task(RunContext(load_run_config(config.run_config, [("seed", seed), *config.overrides]), run))
    folders = {SYM_LARGE: run / "models" / "care" / "init_document" / "document",
               CARE: run / "models" / "care" / "stage2" / "model"}
    options = RunOptions(cache=EmbeddingCache(work / config.dataset / "cache" / "embeddings"), show_progress=False)
    scores = {}
    for row, folder in folders.items():
        bare = work / config.dataset / "without_stored_prompts" / f"seed{seed}" / row.replace(" ", "_")
        bare.mkdir(parents=True, exist_ok=True)
        for item in folder.iterdir():
            if item.name != PROMPTS_FILE and not (bare / item.name).exists():
                (bare / item.name).symlink_to(item.resolve())
        scores[row] = {"as trained": evaluate(load_model(str(folder)), task, options).scores["ndcg_at_10"],
                       "without stored prompts": evaluate(load_model(str(bare)), task, options).scores["ndcg_at_10"]}
    return BenchmarkRecord(EXPERIMENT, f"{config.dataset}_without_stored_prompts",
                           config={"run_config": str(config.run_config.relative_to(ROOT)),
                                   "overrides": list(config.overrides)},
                           seeds=[seed], scores=scores, latencies={})


def budget_selection(runs: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The query-latency budget's pick (``recipes.care.query_speedup``) in the selection protocol's block, per seed
    run: chosen by measured speed-ups, no quality score (``selected_on: speed``)."""
    out = []
    for seed, run in sorted(runs.items()):
        choice = run.get("query_budget")
        if choice:
            out.append(Selection(f"query tower depth (seed {seed})", SPEED, str(choice["depth"]),
                                 {str(d): v for d, v in choice["speedups"].items()},
                                 metric=f"speed-up over the document model's query side ({choice['engine']})",
                                 record=f"care run manifest, seed {seed} (steps.train_care.outputs.query_budget)",
                                 note=f"the deepest cut at least {choice['budget']:g}x faster").to_dict())
    return out


def row_scores(runs: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per row (and per row on validation, ``<row> (validation)``): nDCG@10 per seed that scored it, mean, std."""
    seeds = sorted(runs)
    scores: dict[str, Any] = {}
    for row in (r["model"] for r in runs[seeds[0]]["rows"]):
        for task, suffix in ((None, ""), (VALIDATION_TASK, VALIDATION_SUFFIX)):
            values, scored = [], []
            for seed in seeds:
                found = next((r for r in runs[seed]["rows"] if r["model"] == row), None)
                name = task or runs[seed]["main_task"]
                if found and name in found["scores"]:
                    values.append(found["scores"][name])
                    scored.append(seed)
            if values:
                scores[row + suffix] = {"per_seed": values, "seeds": scored, "mean": statistics.mean(values),
                                        "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    return scores


def targets(scores: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 43's targets from the rows' means (CARE / symmetric large also per seed); ``{}`` without the rows."""
    mean = {row: scores[row]["mean"] for row in ROWS if row in scores}
    if not {CARE, SYM_LARGE, SYM_SMALL, E5} <= set(mean):
        return {}
    return {"CARE / symmetric large": mean[CARE] / mean[SYM_LARGE],
            "CARE / symmetric large per seed": {str(seed): ratio for seed, ratio in
                                                per_seed_ratios(scores[CARE], scores[SYM_LARGE]).items()},
            f"CARE >= {TARGET_RATIO:.0%} of symmetric large": mean[CARE] >= TARGET_RATIO * mean[SYM_LARGE],
            "CARE - symmetric small": mean[CARE] - mean[SYM_SMALL],
            f"CARE >= symmetric small + {TARGET_MARGIN}": mean[CARE] >= mean[SYM_SMALL] + TARGET_MARGIN,
            "CARE - e5 zero-shot": mean[CARE] - mean[E5], "CARE >= e5 zero-shot": mean[CARE] >= mean[E5]}


def summarise(config: TransferConfig, runs: dict[int, dict[str, Any]],
              selections: list[dict[str, Any]] | None = None) -> BenchmarkRecord:
    """The record over ``runs`` (``{seed: run_seed's dict}``): per row nDCG@10 per seed, mean and std on the main
    task and on validation; the targets, CARE's ratio to symmetric large per seed beside the ratio of means; the
    selection protocol's block (``selections`` of how the preset's settings were chosen, kept from the record this
    one replaces, then the budget's pick)."""
    scores = row_scores(runs)
    resolved = portable(load_run_config(config.run_config, config.run_overrides()).to_dict())
    extra = {TARGETS_KEY: targets(scores), "per_seed": portable({seed: {k: v for k, v in run.items() if k != "rows"}
                                                                for seed, run in runs.items()})}
    budget = {str(seed): run["query_budget"] for seed, run in runs.items() if run.get("query_budget")}
    if budget:
        extra[QUERY_BUDGET_KEY] = budget
    kept = [s for s in selections or [] if s.get("selected_on") != SPEED]  # the budget's picks are made anew
    if kept or budget:
        extra[SELECTION_KEY] = [*kept, *budget_selection(runs)]
    return BenchmarkRecord(EXPERIMENT, config.record_name,
                           config={"run_config": str(config.run_config.relative_to(ROOT)),
                                   "overrides": config.shown_overrides(), "resolved": resolved},
                           seeds=sorted(runs), scores=scores, latencies={}, extra=extra)
