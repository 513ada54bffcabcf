"""Sweeps (``care train sweep CONFIG``): train recipe variants, score them on validation, pick the best.

How the ``e5`` preset's settings were chosen, as a command: a :class:`SweepConfig` names a base recipe (towers,
training file, corpus, config folder or preset, overrides, ablation switches) and its variants
(:mod:`care.train.recipes.variants`: ``{name: [STAGE:KEY=VALUE, recipe:FIELD=VALUE, stage2:mine=N, ...]}``). The sweep

1. **carves a validation split** from the training file, once (:func:`care.train.recipes.validation.carve_validation`:
   whole query–answer components held out; every run trains on the rest);
2. **trains the base recipe** (:func:`care.train.recipes.recipe.run_recipe`) into ``<output>/base``, with the safety net
   scoring its stages on that split (the base rows of the report);
3. **trains each variant** into ``<output>/variants/<name>`` (:func:`train_variant`), reusing the base run's
   finished stages that the variant does not change (Stage II variants share init and Stage I, and the file
   Stage II's negatives were mined into);
4. **scores** the base and every variant's final model on the split with one cached scorer
   (:class:`care.train.recipes.validation.StageValidator`: scores kept by model fingerprint in
   ``<output>/validation/scores.json``, vectors in the embedding cache ``<output>/validation/cache``), so a
   rerun scores only what changed;
5. **reports and picks** the best by the config's metric (``<output>/sweep.json`` and ``sweep.md``; a tie goes
   to the base, then to the variant listed first); ``sweep.json`` keeps the choice in the selection protocol's block
   (``selection``: :class:`care.bench.selection.Selection`, ``selected_on: validation``, every row's score).

Everything is resumable: finished stages are skipped, kept scores reused. Paths in the config are read from
the working directory; ``e5`` / ``e5?layers=N`` tower specs are exported into ``<output>/towers`` once.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from care.config import Config, ConfigError
from care.errors import CareError
from care.train.engine.trainer import TrainResult, read_result
from care.train.recipes.plan import RECIPE_STAGES, RecipeConfig, RecipePaths, RecipePlan, seed_of
from care.train.recipes.validation import METRICS, StageScore, ValidationConfig, ValidationSplit
from care.train.recipes.variants import Variant, parse_items
from care.train.stage_settings import StageSetting, parse_settings

logger = logging.getLogger(__name__)

#: Folders and files of a sweep's output folder.
BASE = "base"
VARIANTS_FOLDER = "variants"
TOWERS_FOLDER = "towers"
VALIDATION_FOLDER = "validation"
CACHE_FOLDER = "cache"
REPORT_JSON = "sweep.json"
REPORT_MARKDOWN = "sweep.md"
#: Which recipe stages each stage's inputs come from (care.train.recipes.recipe.run_recipe's wiring): a variant reuses a
#: base stage only when it changes neither that stage nor any stage it is built on.
STAGE_INPUTS: dict[str, tuple[str, ...]] = {"init_query": (), "init_document": (),
                                           "stage1": ("init_query", "init_document"),
                                           "stage1_rank": ("stage1", "init_document"),
                                           "stage2": ("init_query", "init_document", "stage1", "stage1_rank")}


@dataclass
class SweepConfig(Config):
    """A sweep (``care train sweep CONFIG``; ``configs/sweeps/*.yaml``).

    Attributes:
        query_model / document_model: the towers (folders, hub ids, or ``e5`` / ``e5?layers=N`` tower specs).
        train_file: the training JSONL; the validation split is carved from it.
        corpus_file: ``corpus.jsonl`` the held-out queries search (and Stage II mines from); ``None``: every
            positive and negative of the training file.
        alignment_file: Stage I's alignment JSONL (rows holding a held-out text are dropped); ``None``: built
            from the training rows.
        config_dir: the recipe's stage configs (a folder, or ``preset:e5``); ``None``: as ``care train recipe``
            picks (the e5 preset for an e5 document tower).
        overrides: the base recipe's ``KEY=VALUE`` / ``STAGE:KEY=VALUE`` overrides (``seed=1`` seeds the runs).
        recipe: the base recipe's ablation switches and mining (:class:`care.train.recipes.recipe.RecipeConfig`).
        variants: ``{name: [item, ...]}`` in the variant grammar (:mod:`care.train.recipes.variants`).
        validation: the split (:class:`care.train.recipes.validation.ValidationConfig`; must be enabled).
        metric: what ranks the variants: one of :data:`care.train.recipes.validation.METRICS`.
        output_dir: where the sweep writes (``care train sweep --output`` wins).
    """

    query_model: str = ""
    document_model: str = ""
    train_file: str = ""
    corpus_file: str | None = None
    alignment_file: str | None = None
    config_dir: str | None = None
    overrides: list[str] = field(default_factory=list)
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    variants: dict[str, list[str]] = field(default_factory=dict)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    metric: str = METRICS[0]
    output_dir: str = "runs/sweep"

    def validate(self) -> None:
        for name in ("query_model", "document_model", "train_file"):
            if not getattr(self, name):
                raise ConfigError(f"config field '{name}': required (see docs/training.md, Sweeps)")
        if self.metric not in METRICS:
            raise ConfigError(f"config field 'metric': must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if not self.validation.enabled:
            raise ConfigError("config field 'validation.enabled': a sweep picks its best variant on the validation "
                              "split; it cannot be false")
        self.validation.validate()
        if not isinstance(self.overrides, list):
            raise ConfigError(f"config field 'overrides': expected a list of KEY=VALUE strings, got {self.overrides!r}")
        self.parsed_settings()
        if not self.variants:
            raise ConfigError("config field 'variants': give at least one variant, e.g. "
                              "{mined2: ['stage2:mine=2'], lr4: ['stage2:optim.lr=4e-5']}")
        self.parsed_variants()

    def parsed_settings(self) -> tuple[StageSetting, ...]:
        """The base recipe's ``overrides``, parsed (errors name the item)."""
        return parse_settings(self.overrides, source="config field 'overrides': item")

    def parsed_variants(self) -> list[Variant]:
        """The variants, parsed (errors name the variant and its item)."""
        try:
            return [parse_items(name, items) for name, items in self.variants.items()]
        except ConfigError as exc:
            raise ConfigError(f"config field 'variants': {exc}") from None


def load_sweep_config(path: str | Path, overrides: Sequence[str] = ()) -> SweepConfig:
    """Read a :class:`SweepConfig` from YAML / JSON with ``KEY=VALUE`` overrides; errors name the file and field."""
    return SweepConfig.load(path, overrides)


def stage_folder(plan: RecipePlan, stage: str) -> Path:
    """Where ``plan``'s ``stage`` is (its own folder, or a finished one it reuses)."""
    return Path((plan.paths.finished_stages or {}).get(stage, Path(plan.paths.output_dir) / stage))


def changed_stages(variant: Variant) -> set[str]:
    """The recipe stages ``variant`` changes, directly or through a stage they are built on (:data:`STAGE_INPUTS`)."""
    from care.train.recipes.variants import SWITCH_STAGE

    changed = {setting.stage for setting in variant.settings}
    changed = {s for s in changed if s is not None} | ({*RECIPE_STAGES} if None in changed else set())
    changed |= {SWITCH_STAGE[name] for name in variant.switches}
    if variant.mining is not None:
        changed.add("stage2")
    for stage in RECIPE_STAGES:  # in wiring order: a stage built on a changed one changes too
        if any(s in changed for s in STAGE_INPUTS[stage]):
            changed.add(stage)
    return changed


def share_mined_file(source_dir: str | Path, target_dir: str | Path) -> Path | None:
    """Copy a recipe folder's mined Stage II file (and its mining record) into another recipe folder that mines
    with the same document tower and training file, unless it has one; the recipe then reuses it when its
    mining settings match (:func:`care.train.recipes.model_negatives.is_mined_with`) and mines again when they do not.
    Returns the copied file, or None."""
    from care.data.io import atomic_write
    from care.train.recipes.model_negatives import mining_record
    from care.train.recipes.recipe import MINED_FILE

    source, target = Path(source_dir) / MINED_FILE, Path(target_dir) / MINED_FILE
    if target.is_file() or not source.is_file() or not mining_record(source).is_file():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    for src, dst in ((mining_record(source), mining_record(target)), (source, target)):  # the file last
        with open(src, "rb") as fh, atomic_write(dst, "wb") as out:
            shutil.copyfileobj(fh, out)
    logger.info("%s: Stage II's mined file shared from %s", target_dir, source)
    return target


def variant_plan(base: RecipePlan, variant: Variant, output_dir: str | Path) -> RecipePlan:
    """The plan of ``variant`` of ``base`` in ``output_dir``: the base's settings then the variant's, its switches
    and mining, every finished stage of ``base`` it does not change (:func:`changed_stages`) reused, validation
    off (the sweep scores the variants itself)."""
    from care.train.recipes.validation import ValidationConfig

    changed = changed_stages(variant)
    reused = {s: str(stage_folder(base, s)) for s in RECIPE_STAGES
              if s not in changed and _finished(stage_folder(base, s))}
    plan = replace(base.with_paths(output_dir=str(output_dir), finished_stages=reused, validation_task=None),
                   recipe=variant.recipe(base.recipe), validation=ValidationConfig(enabled=False))
    return plan.with_settings(*variant.settings)


def train_variant(base: RecipePlan, variant: Variant, output_dir: str | Path) -> dict[str, TrainResult]:
    """Train ``variant`` of ``base`` into ``output_dir`` (:func:`variant_plan`); returns each stage's result (the
    reused ones included)."""
    from care.train.recipes.recipe import run_recipe

    plan = variant_plan(base, variant, output_dir)
    if "init_document" in (plan.paths.finished_stages or {}):  # Stage II mines with the same document tower
        share_mined_file(base.paths.output_dir, output_dir)
    logger.info("sweep: variant %s (%s) reuses %s", variant.name, "; ".join(variant.items) or "the base recipe",
                ", ".join(plan.paths.finished_stages or {}) or "nothing")
    return run_recipe(plan)


def _finished(folder: Path) -> bool:
    result = read_result(folder)
    return result is not None and result.completed


def final_model(results: Mapping[str, TrainResult]) -> str:
    """The spec of a recipe run's final CARE model, with the prompts its stage trained it with."""
    from care.train.recipes.recipe import stage_model_spec

    stage = next((s for s in reversed(RECIPE_STAGES) if s in results and results[s].care_model), None)
    if stage is None:
        raise CareError(f"the run trained no CARE model (stages {', '.join(results)}): a variant must keep Stage I "
                        "or Stage II")
    return stage_model_spec(str(results[stage].care_model), results[stage].output_dir)


def pick_best(scores: Mapping[str, float]) -> str:
    """The name with the highest score; a tie goes to the one listed first (a sweep lists the base first)."""
    if not scores:
        raise CareError("no scores to pick from")
    return max(scores, key=lambda name: scores[name])  # max keeps the first of equal scores


@dataclass
class SweepResult:
    """What a sweep produced.

    Attributes:
        best: the best row (``base`` or a variant name); best_model: its model spec.
        scores: every row's validation scores; report / markdown: the written reports.
    """

    best: str
    best_model: str
    scores: dict[str, StageScore]
    report: Path
    markdown: Path


def run_sweep(config: SweepConfig, *, output_dir: str | Path | None = None) -> SweepResult:
    """Run (or finish) a sweep (see the module docstring); returns the best row and where the reports are.

    Raises:
        CareError: the training file is too small to hold out ``validation.min_queries`` queries, or a config
            error of the recipe (naming the stage and field).
    """
    from care.models.tower_spec import resolve_tower_spec
    from care.train.recipes.recipe import run_recipe
    from care.train.recipes.validation import StageValidator, carve_validation, without_held_out

    out = Path(output_dir or config.output_dir)
    variants = config.parsed_variants()
    folder = out / VALIDATION_FOLDER
    settings = config.parsed_settings()
    split = carve_validation(config.train_file, config.corpus_file, folder, config.validation,
                             seed=seed_of(settings))
    if split is None:
        raise CareError(f"{config.train_file}: too few retrieval rows to hold out validation.min_queries "
                        f"({config.validation.min_queries}) queries; a sweep picks on validation: raise "
                        "validation.share or lower validation.min_queries")
    alignment = config.alignment_file and str(without_held_out(config.alignment_file, split, folder / "alignment.jsonl"))
    towers = out / TOWERS_FOLDER
    paths = RecipePaths(resolve_tower_spec(config.query_model, towers), resolve_tower_spec(config.document_model, towers),
                        str(split.train_file), str(out / BASE), alignment, config.corpus_file,
                        validation_task=str(split.task_dir), cache_dir=str(folder / CACHE_FOLDER))
    base = RecipePlan(paths, config.config_dir, settings, recipe=config.recipe, validation=config.validation)
    validator = StageValidator(split.task_dir, folder, config.validation, cache_dir=folder / CACHE_FOLDER)
    base_results = run_recipe(base)  # its safety net: the base rows
    models = {BASE: final_model(base_results)}
    scores = {BASE: validator.score(BASE, models[BASE], asymmetric=True)}
    for variant in variants:
        models[variant.name] = final_model(train_variant(base, variant, out / VARIANTS_FOLDER / variant.name))
        scores[variant.name] = validator.score(variant.name, models[variant.name], asymmetric=True)
    best = pick_best({name: score.scores[config.metric] for name, score in scores.items()})
    logger.info("sweep: best on validation %s: %s (%.4f)", config.metric, best, scores[best].scores[config.metric])
    report, markdown = write_report(out, config, variants, scores, best, split)
    return SweepResult(best, models[best], scores, report, markdown)


def write_report(out: Path, config: SweepConfig, variants: Sequence[Variant], scores: Mapping[str, StageScore],
                 best: str, split: ValidationSplit) -> tuple[Path, Path]:
    """``<out>/sweep.json`` (every row's scores and settings, the best, the base recipe's stage rows) and
    ``<out>/sweep.md`` (the same as tables); returns both paths."""
    from care.data.io import atomic_write, write_json
    from care.train.recipes.recipe import read_validation

    items = {BASE: [], **{v.name: list(v.items) for v in variants}}
    metric = config.metric
    vs_base = {name: round(s.scores[metric] - scores[BASE].scores[metric], 4) for name, s in scores.items()}
    rows = {name: {"items": items[name], "model": s.spec, "scores": s.scores, "fidelity": s.fidelity,
                   f"{metric}_vs_base": vs_base[name]} for name, s in scores.items()}
    base_rows = read_validation(out / BASE).get("models", {})
    from care.bench.selection import SELECTION_KEY, VALIDATION, Selection

    choice = Selection("variant", VALIDATION, best, {name: s.scores[metric] for name, s in scores.items()},
                       metric=metric, record=str(out / REPORT_JSON))
    report = {"metric": config.metric, "best": best, "best_model": scores[best].spec,
              SELECTION_KEY: [choice.to_dict()],
              "validation": {"task": str(split.task_dir), "training_rows": split.rows, "held_out": split.held_out,
                             "share": config.validation.share},
              "rows": rows, "base_rows": {label: {k: row.get(k) for k in ("scores", "fidelity", "delta", "flagged")}
                                          for label, row in base_rows.items()}}
    write_json(out / REPORT_JSON, report)
    lines = [f"# Sweep {out}: {len(variants)} variant(s) on {split.held_out} held-out queries ({metric})", "",
             f"| row | {metric} | {' | '.join(m for m in METRICS if m != metric)} | alignment fidelity | vs base | "
             "settings |", "|---|---|---|---|---|---|"]
    for name, s in scores.items():
        others = " | ".join(f"{s.scores[m]:.4f}" if m in s.scores else "–" for m in METRICS if m != metric)
        fidelity = f"{s.fidelity:.3f}" if s.fidelity is not None else "–"
        delta = f"{vs_base[name]:+.4f}" if name != BASE else "–"
        label = f"**{name}** (best)" if name == best else name
        lines.append(f"| {label} | {s.scores[metric]:.4f} | {others} | {fidelity} | {delta} | "
                     f"{'; '.join(f'`{i}`' for i in items[name]) or 'the base recipe'} |")
    lines += ["", "The base recipe's stages on the same split (its safety net):", "",
              "| stage | nDCG@10 | vs the stage it started from |", "|---|---|---|"]
    for label, row in base_rows.items():
        delta = f"{row['delta']:+.4f} vs {row['started_from']}" if row.get("delta") is not None else "–"
        lines.append(f"| {label} | {row['scores'].get(METRICS[0], float('nan')):.4f} | {delta} |")
    with atomic_write(out / REPORT_MARKDOWN) as fh:
        fh.write("\n".join(lines) + "\n")
    return out / REPORT_JSON, out / REPORT_MARKDOWN
