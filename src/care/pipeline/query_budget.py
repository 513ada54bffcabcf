"""``recipes.care.query_speedup``: the run's query tower picked for a query-latency budget.

The steps that take CARE's query base (``train_care``, ``train_baselines``) run through
:func:`with_query_budget`: before the step, :func:`apply_query_budget` measures the document model's depth cuts
on a few of the run's training queries (cached in ``<cache>/query_latency/``, keyed by the model's fingerprint
and the engine: :func:`care.bench.depth_latency.measure_depth_latency`), picks the deepest cut at least
``query_speedup`` times faster than the document model's query side
(:func:`care.train.recipes.budget_tower.choose_query_tower`) and hands the step the run's context with ``models.query``
set to that cut — and, where it is one layer, the frontier's richer Stage I (:func:`rich_stage1`) in
``recipes.care`` for every field the user left unset. The choice is logged in one line and recorded in the step's
outputs (``query_budget``: the budget, the speed-ups per depth, the engine, the pick and the settings applied)
and in the run's report (:func:`report_lines`). A budget no cut meets stops the step before any training,
listing the measured speed-ups. Without a budget the steps run as they are.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from care.pipeline.context import RunContext
from care.pipeline.train import TOWERS_CACHE

logger = logging.getLogger(__name__)

#: The run cache's folder of depth-latency curves.
QUERY_LATENCY_CACHE = "query_latency"
#: The key of the choice in the ``train_care`` step's outputs.
OUTPUT_KEY = "query_budget"


def rich_stage1(ctx: RunContext) -> tuple[RunContext, dict[str, Any], list[str]]:
    """``ctx`` with the frontier's richer Stage I in every setting the user left unset — its data as ``recipes.care``
    fields (:data:`care.train.recipes.budget_tower.RICH_DATA_FIELDS`: every corpus sentence of 6-150 characters of
    the documents' text, query-side rows only) and its training settings from the budget's one rule
    (:func:`care.train.recipes.budget_tower.rich_stage1`: both towers at 128 tokens, Stage I 6 epochs at learning
    rate 2.4e-3, its ranking part 3) as typed :attr:`RunContext.recipe_settings`:
    ``(ctx copy, {setting: value applied}, [settings left as the user set them])``."""
    from care.train.recipes.budget_tower import RICH_DATA_FIELDS, setting_label
    from care.train.recipes.budget_tower import rich_stage1 as rich_rule
    from care.train.stage_settings import parse_settings

    recipe = ctx.config.recipes.care
    applied: dict[str, Any] = {}
    kept: list[str] = []
    changes: dict[str, Any] = {}
    for name, value in RICH_DATA_FIELDS.items():
        if getattr(recipe, name) is None:
            changes[name] = applied[f"recipes.care.{name}"] = value
        else:
            kept.append(f"recipes.care.{name}")
    typed = (("optim.epochs", recipe.epochs), ("optim.lr", recipe.lr),
             ("model.query_max_seq_length", recipe.query_max_length),
             ("model.document_max_seq_length", recipe.document_max_length))
    added, kept_settings = rich_rule(parse_settings(recipe.overrides, source="recipes.care.overrides: item"),
                                     user_set=[key for key, value in typed if value is not None])
    kept += kept_settings
    applied.update({setting_label(s): s.value for s in added})
    budgeted = copy.copy(ctx)
    budgeted.config = replace(ctx.config, recipes=replace(ctx.config.recipes, care=replace(recipe, **changes)))
    budgeted.recipe_settings = (*ctx.recipe_settings, *added)
    return budgeted, applied, kept


def apply_query_budget(ctx: RunContext,
                       towers_dir: str | Path | None = None) -> tuple[RunContext, dict[str, Any] | None]:
    """The run's context with the query tower picked for ``recipes.care.query_speedup`` (a copy: the run's own
    config is untouched), and the choice as a dict (:meth:`~care.train.recipes.budget_tower.QueryTowerChoice.to_dict`);
    ``(ctx, None)`` without a budget.

    Args:
        ctx: the run's context.
        towers_dir: where tower specs are exported (``e5`` resolved there, once, as the train steps do; ``None``:
            the run cache's :data:`care.pipeline.train.TOWERS_CACHE`).
    Raises:
        care.train.recipes.budget_tower.QueryBudgetError: no cut meets the budget, or the measurement is untrusted.
    """
    config = ctx.config
    budget = config.recipes.care.query_speedup
    if budget is None:
        return ctx, None
    from care.models.tower_spec import resolve_tower_spec
    from care.train.recipes.budget_tower import choose_query_tower, training_queries

    document = resolve_tower_spec(config.models.document, towers_dir or ctx.cache_dir(TOWERS_CACHE))
    queries = training_queries(ctx.require(ctx.train_file, "label"))
    choice = choose_query_tower(config.models.query, document, budget, queries, ctx.cache_dir(QUERY_LATENCY_CACHE),
                                timing=config.recipes.care.query_speedup_timing)
    budgeted, applied, kept = rich_stage1(ctx) if choice.rich_stage1 else (copy.copy(ctx), {}, [])
    choice.settings = {"models.query": choice.query_spec, **applied}
    choice.kept = kept
    logger.info("%s", choice.describe())
    budgeted.config = replace(budgeted.config, models=replace(config.models, query=choice.query_spec))
    return budgeted, choice.to_dict()


def with_query_budget(step: Callable[[RunContext], dict[str, Any]]) -> Callable[[RunContext], dict[str, Any]]:
    """``step`` run on the context :func:`apply_query_budget` returns; its outputs gain the choice
    (:data:`OUTPUT_KEY`) when there is a budget."""

    @functools.wraps(step)
    def budgeted(ctx: RunContext) -> dict[str, Any]:
        picked, choice = apply_query_budget(ctx)
        outputs = step(picked)
        return {**outputs, OUTPUT_KEY: choice} if choice else outputs

    return budgeted


def report_lines(choice: dict[str, Any] | None) -> list[str]:
    """The report's lines on the choice (``results.md``); none without a budget."""
    if not choice:
        return []
    from care.train.recipes.budget_tower import format_speedups

    speedups = {int(d): v for d, v in choice["speedups"].items()}
    settings = ", ".join(f"`{k}: {v}`" for k, v in choice["settings"].items())
    kept = f"; left as set: {', '.join(choice['kept'])}" if choice["kept"] else ""
    return [(f"Query tower for the query-latency budget of {choice['budget']:g}×: `{choice['query_spec']}` "
             f"({choice['depth']} of {choice['layers']} layers, {speedups[choice['depth']]:.2f}× faster than the "
             f"document model's query side). Measured here ({choice['engine']}), speed-up per depth: "
             f"{format_speedups(speedups)}; {choice['self_check']}."),
            f"Settings applied: {settings}{kept}.", ""]
