"""The recipe's ``key=value`` settings: user syntax, read here once, typed everywhere after.

Users write ``optim.lr=1e-4`` (every stage) or ``stage2:optim.lr=5e-5`` (one stage) on a command line
(``--set``) or in a YAML list (``recipes.care.overrides``, an ablation's ``overrides``, a sweep's variants).
:func:`parse_setting` turns one into a :class:`StageSetting` — a recipe stage (or every stage), a dotted
key and its value read as YAML — and from there the package passes typed settings (the recipe's plan,
:mod:`care.train.recipes.plan`), never strings. :func:`format_setting` writes one back in the user's syntax
for records and messages (``recipe.json``'s ``overrides``, the budget's choice): the text as the user wrote
it, or the canonical form of a setting the package made.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from care.config import ConfigError, plain, set_dotted

#: Separates a stage from its key (``stage2:optim.lr``).
STAGE_SEPARATOR = ":"


@dataclass(frozen=True)
class StageSetting:
    """One setting of a recipe's stage configs.

    Attributes:
        key: the dotted field of a stage config (``optim.lr``; ``stage`` picks the training stage).
        value: its value (as YAML reads it: ``1e-4`` stays text until the stage config types it).
        stage: the recipe stage (or baseline step) it sets; ``None``: every stage.
        text: the setting as the user wrote it (``None`` for one the package made); records keep it verbatim.
    """

    key: str
    value: Any = None
    stage: str | None = None
    text: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = {"stage": self.stage, "key": self.key, "value": plain(self.value)}
        return {**out, "text": self.text} if self.text is not None else out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageSetting:
        return cls(key=str(data["key"]), value=data.get("value"), stage=data.get("stage"), text=data.get("text"))

    def __str__(self) -> str:
        return format_setting(self)


def parse_setting(text: str) -> StageSetting:
    """``"stage2:optim.lr=5e-5"`` -> ``StageSetting("optim.lr", "5e-5", "stage2")``; ``"seed=1"`` -> every stage.

    Raises:
        ConfigError: no ``=``, an empty key, or a value that is not valid YAML (naming the setting).
    """
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE or STAGE:KEY=VALUE, e.g. stage2:optim.lr=5e-5")
    name, raw = text.split("=", 1)
    stage, sep, key = name.rpartition(STAGE_SEPARATOR)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r}: no key before '='")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({exc})") from None
    return StageSetting(key, value, stage.strip() if sep else None, text=text)


def parse_settings(texts: Iterable[str]) -> list[StageSetting]:
    """:func:`parse_setting` of each, in order."""
    return [parse_setting(text) for text in texts]


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(plain(value), ensure_ascii=False)  # text quoted; lists and mappings as flow YAML


def format_setting(setting: StageSetting) -> str:
    """``setting`` in the user's syntax (the inverse of :func:`parse_setting`): its text as written, else
    ``[STAGE:]KEY=VALUE`` with the value as YAML reads it back (text quoted)."""
    if setting.text is not None:
        return setting.text
    prefix = f"{setting.stage}{STAGE_SEPARATOR}" if setting.stage else ""
    return f"{prefix}{setting.key}={_format_value(setting.value)}"


def format_settings(settings: Iterable[StageSetting]) -> list[str]:
    """:func:`format_setting` of each, in order."""
    return [format_setting(s) for s in settings]


def sets_key(settings: Sequence[StageSetting], stage: str, key: str) -> bool:
    """Whether ``settings`` set ``key`` (e.g. ``optim.epochs``) for every stage or for ``stage``."""
    return any(s.key == key and s.stage in (None, stage) for s in settings)


def sets_anywhere(settings: Sequence[StageSetting], key: str) -> bool:
    """Whether any of ``settings`` sets ``key``, for every stage or for one."""
    return any(s.key == key for s in settings)


def apply_settings(data: dict[str, Any], settings: Sequence[StageSetting], stage: str, *,
                   common: bool = True) -> dict[str, Any]:
    """A copy of the config tree ``data`` with the settings for ``stage`` set: every stage's first (unless
    ``common`` is false), then the stage's own, each in order (missing sections created).

    Raises:
        ConfigError: a setting's key runs through a value that is not a section (naming the setting).
    """
    data = copy.deepcopy(data)
    for wanted in ((None, stage) if common else (stage,)):
        for setting in settings:
            if setting.stage == wanted:
                set_dotted(data, setting.key, copy.deepcopy(setting.value), what=f"override {format_setting(setting)!r}")
    return data
