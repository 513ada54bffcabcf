"""The variant grammar: how a sweep (``care train sweep``) and the benchmark drivers name a change to the recipe.

A variant is a name and a list of items; on a command line ``NAME=ITEM;ITEM;...`` (:func:`parse_variant`), in
a sweep config ``variants: {NAME: [ITEM, ...]}``. An item is one of:

==============================  ===================================================================
item                            meaning
==============================  ===================================================================
``STAGE:KEY=VALUE``             a stage-config override of one recipe stage (``stage2:optim.lr=4e-5``;
                                STAGE one of :data:`care.train.recipes.recipe.RECIPE_STAGES`)
``KEY=VALUE``                   an override of every stage (``optim.batch_size=64``)
``recipe:FIELD=VALUE``          an ablation switch of :class:`care.train.recipes.recipe.RecipeConfig`
                                (``recipe:skip_stage1=true``, ``recipe:stage1_data=finetune``)
``stage2:mine=N``               Stage II trains on N hard negatives per query mined by the initialised
                                document tower; ``stage2:mine=0``: none, whatever the config folder says
``stage2:mine.FIELD=VALUE``     a :class:`care.train.recipes.model_negatives.MiningConfig` field of that mining
                                (``stage2:mine.relative_margin=0.02``); needs ``stage2:mine=N``
==============================  ===================================================================

A variant without mining items mines as the base recipe does (its config folder's ``recipe.yaml``). Values
are read as YAML (``1e-4``, ``null``, ``true``). Every item is checked when it is parsed, so a misspelt field
fails before any training (the error names the item and says what is accepted).

A sweep trains a variant reusing every stage of the base run it does not change
(:func:`care.train.recipes.sweep.changed_stages`): Stage II variants share init and Stage I.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import yaml

from care.config import ConfigError, build
from care.train.stage_settings import StageSetting, apply_settings, parse_setting

if TYPE_CHECKING:
    from care.train.recipes.plan import RecipeConfig

#: The prefix of a recipe switch item.
RECIPE_PREFIX = "recipe:"
#: The mining items' key, and the prefix of a mining field.
MINE_KEY = "stage2:mine"
MINE_FIELD_PREFIX = "stage2:mine."
#: Separator of items in ``NAME=ITEM;ITEM`` (``,`` may occur inside a value, e.g. a YAML list).
ITEM_SEPARATOR = ";"
#: What a variant name may hold (it names a folder and a report row).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: Recipe switches an item may set, and the first recipe stage each one changes.
SWITCH_STAGE: dict[str, str] = {"skip_query_init": "init_query", "pretrained_query_model": "init_query",
                                "skip_document_init": "init_document", "skip_stage1": "stage1",
                                "stage1_data": "stage1", "skip_stage1_rank": "stage1_rank", "skip_stage2": "stage2"}
#: How an item is written (the error messages quote it).
ITEM_FORMS = "STAGE:KEY=VALUE, KEY=VALUE, recipe:FIELD=VALUE, stage2:mine=N or stage2:mine.FIELD=VALUE"


@dataclass(frozen=True)
class Variant:
    """A parsed variant.

    Attributes:
        name: its name (a folder and a report row).
        items: the items as written.
        settings: the stage settings (``STAGE:KEY=VALUE`` and ``KEY=VALUE`` items, parsed), in order.
        switches: the recipe switches (``RecipeConfig`` field -> value).
        mining: the Stage II mining (a ``MiningConfig`` dict; ``{"n_negatives": 0}``: none); ``None``: as
            the base recipe mines.
    """

    name: str
    items: tuple[str, ...] = ()
    settings: tuple[StageSetting, ...] = ()
    switches: dict[str, Any] = field(default_factory=dict)
    mining: dict[str, Any] | None = None

    def recipe(self, base: RecipeConfig) -> RecipeConfig:
        """The :class:`care.train.recipes.recipe.RecipeConfig` of this variant: ``base`` with its switches and mining."""
        changes: dict[str, Any] = dict(self.switches)
        if self.mining is not None:
            changes["mine_negatives"] = dict(self.mining)
        return replace(base, **changes) if changes else base


def check_variant_name(name: str) -> str:
    """``name`` when it can name a variant (letters, digits, ``_ . -``; not ``base``).

    Raises:
        ConfigError: naming the variant and what a name may hold.
    """
    if not NAME_PATTERN.fullmatch(name or ""):
        raise ConfigError(f"variant name {name!r}: use letters, digits, '_', '.' or '-' (it names a folder), "
                          "starting with a letter or digit")
    if name == "base":
        raise ConfigError("variant name 'base': that name is the base recipe's row; choose another")
    return name


def parse_variant(text: str) -> Variant:
    """``NAME=ITEM;ITEM;...`` (a command line's ``--variant``) -> :class:`Variant`; ``NAME=`` is the base recipe
    retrained under that name.

    Raises:
        ConfigError: no ``=``, a bad name or a bad item (see :func:`parse_items`).
    """
    name, sep, rest = text.partition("=")
    if not sep:
        raise ConfigError(f"variant {text!r}: write NAME=ITEM;ITEM;... with items {ITEM_FORMS}")
    return parse_items(name.strip(), [item.strip() for item in rest.split(ITEM_SEPARATOR) if item.strip()])


def parse_items(name: str, items: Sequence[str]) -> Variant:
    """A variant from its name and items (a sweep config's ``variants: {NAME: [ITEM, ...]}``).

    Raises:
        ConfigError: a bad name, an item of no known form, an unknown stage, recipe field or mining field, a
            value of the wrong type, or mining fields without ``stage2:mine=N`` — naming the variant and item.
    """
    check_variant_name(name)
    settings: list[StageSetting] = []
    switches: dict[str, Any] = {}
    mining: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"variant {name!r}: item {item!r} is not text; write {ITEM_FORMS}")
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"variant {name!r}: item {item!r} is not KEY=VALUE; write {ITEM_FORMS}")
        if key == MINE_KEY:
            mining["n_negatives"] = _count(name, item, value)
        elif key.startswith(MINE_FIELD_PREFIX):
            mining[key[len(MINE_FIELD_PREFIX):]] = _value(name, item, value)
        elif key.startswith(RECIPE_PREFIX):
            switch = key[len(RECIPE_PREFIX):]
            if switch not in SWITCH_STAGE:
                raise ConfigError(f"variant {name!r}: item {item!r}: {switch!r} is not a recipe switch; recipe: "
                                  f"takes {', '.join(SWITCH_STAGE)} (mining: stage2:mine=N)")
            switches[switch] = _value(name, item, value)
        else:
            settings.append(_stage_setting(name, item))
    if mining and "n_negatives" not in mining:
        raise ConfigError(f"variant {name!r}: mining settings {sorted(mining)} need stage2:mine=N (negatives per "
                          "query; stage2:mine=0 mines none)")
    variant = Variant(name, tuple(items), tuple(settings), switches, mining or None)
    _check_settings(variant)
    return variant


def _value(name: str, item: str, text: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        raise ConfigError(f"variant {name!r}: item {item!r}: the value is not valid YAML") from None


def _count(name: str, item: str, text: str) -> int:
    value = _value(name, item, text)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"variant {name!r}: item {item!r}: N must be a whole number >= 0 (negatives per query)")
    return value


def _stage_setting(name: str, item: str) -> StageSetting:
    """A stage item as a typed setting; it must name a recipe stage and a field of that stage's config."""
    from care.train.engine.config import TrainConfig, build_unvalidated
    from care.train.recipes.plan import RECIPE_STAGES

    try:
        setting = parse_setting(item, source=f"variant {name!r}: item")
    except ConfigError as exc:
        raise ConfigError(f"{exc}; write {ITEM_FORMS}") from None
    if setting.stage is not None and setting.stage not in RECIPE_STAGES:
        raise ConfigError(f"variant {name!r}: item {item!r}: unknown stage {setting.stage!r}; stages are "
                          f"{', '.join(RECIPE_STAGES)} (recipe: for a recipe switch)")
    try:  # every stage's config is the same tree of fields (care.train.engine.config.TrainConfig)
        build_unvalidated(apply_settings(TrainConfig().to_dict(), [setting]))
    except ConfigError as exc:
        raise ConfigError(f"variant {name!r}: item {item!r}: {exc}") from None
    return setting


def _check_settings(variant: Variant) -> None:
    """The switches and the mining settings build (types and known fields)."""
    from care.train.recipes.model_negatives import MiningConfig
    from care.train.recipes.plan import RecipeConfig

    if variant.switches:
        try:
            build(RecipeConfig, variant.switches)
        except ConfigError as exc:
            raise ConfigError(f"variant {variant.name!r}: {exc}") from None
    if variant.mining and variant.mining["n_negatives"]:  # stage2:mine=0 mines nothing: no settings to check
        build(MiningConfig, variant.mining, source=f"variant {variant.name!r}: stage2:mine")
