"""Tests' edge: a recipe run from ``key=value`` items, as a user's command line gives them (parsed once here)."""

from __future__ import annotations

from collections.abc import Sequence

from care.train.recipes.plan import RECIPE_STAGES, RecipeConfig, RecipePaths, RecipePlan
from care.train.recipes.recipe import run_recipe
from care.train.recipes.validation import ValidationConfig
from care.train.stage_settings import parse_settings


def plan_of(paths: RecipePaths, *, config_dir=None, overrides: Sequence[str] = (), stages=RECIPE_STAGES,
            recipe: RecipeConfig | None = None, validation: ValidationConfig | None = None) -> RecipePlan:
    return RecipePlan(paths, config_dir, parse_settings(overrides, source="test setting"), tuple(stages),
                      recipe or RecipeConfig(), validation or ValidationConfig())


def run_plan(paths: RecipePaths, **kwargs):
    """:func:`run_recipe` of :func:`plan_of` (the old keyword form)."""
    return run_recipe(plan_of(paths, **kwargs))


def run_baseline_items(name: str, paths, overrides: Sequence[str] = (), **kwargs):
    """:func:`care.train.recipes.baselines.run_baseline` with ``key=value`` items (parsed here)."""
    from care.train.recipes.baselines import run_baseline

    return run_baseline(name, paths, parse_settings(overrides, source="test setting"), **kwargs)
