"""Typed stage settings: what ``key=value`` / ``stage:key=value`` says, parsed once at the edge.

Users write a recipe's settings as text (``--set optim.lr=1e-4`` sets every stage, ``stage2:optim.lr=5e-5`` one
stage; the same items in a run config's ``recipes.care.overrides``, a sweep's ``overrides`` and ``variants``, an
ablation YAML's ``overrides``, a baseline's ``overrides``). :func:`parse_settings` is the one reader of that
syntax; everything inside the package passes :class:`StageSetting` values — an ``int`` stays an ``int`` from the run
config to the stage's :class:`~care.train.engine.config.TrainConfig` — and applies them with
:func:`apply_settings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from care.config import ConfigError, parse_value, set_dotted

#: A setting that applies to every stage (no ``stage:`` prefix).
EVERY_STAGE = None


@dataclass(frozen=True)
class StageSetting:
    """One typed setting of a stage config.

    Attributes:
        key: the dotted field (``optim.lr``, ``data.max_examples``, ``seed``).
        value: its typed value (``2e-4``, ``16``, ``None``, ``[64, 32]``).
        stage: the stage it targets (``stage1``), or ``None`` for every stage.
    """

    key: str
    value: Any
    stage: str | None = EVERY_STAGE

    def applies_to(self, stage: str) -> bool:
        """Whether the setting is part of ``stage``'s config (it targets every stage or that one)."""
        return self.stage in (EVERY_STAGE, stage)

    def to_dict(self) -> dict[str, Any]:
        """``{"stage", "key", "value"}`` (JSON ready when the value is)."""
        return {"stage": self.stage, "key": self.key, "value": self.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageSetting:
        return cls(str(data["key"]), data.get("value"), data.get("stage"))


def parse_setting(item: str, *, source: str = "setting") -> StageSetting:
    """``"stage2:optim.lr=5e-5"`` -> ``StageSetting("optim.lr", 5e-5, "stage2")``; the value is read as YAML.

    Raises:
        ConfigError: not ``KEY=VALUE``, an empty key or stage, or a value that is not YAML — naming ``source``
            and the item.
    """
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"{source} {item!r}: expected KEY=VALUE or STAGE:KEY=VALUE, e.g. stage1:optim.lr=2e-4")
    name, _, raw = item.partition("=")
    stage, _, key = name.partition(":") if ":" in name else (None, "", name)
    stage = stage.strip() if stage is not None else None
    if not key.strip() or stage == "":
        raise ConfigError(f"{source} {item!r}: the key (and a stage before ':') must not be empty, "
                          "e.g. stage1:optim.lr=2e-4")
    return StageSetting(key.strip(), parse_value(raw, f"{source} {item!r}"), stage)


def parse_settings(items: Iterable[str], *, source: str = "setting") -> tuple[StageSetting, ...]:
    """Each user item parsed (:func:`parse_setting`), in order."""
    return tuple(parse_setting(item, source=source) for item in items)


def for_stage(settings: Iterable[StageSetting], stage: str) -> list[StageSetting]:
    """The settings of ``stage``: those for every stage first, then the stage's own (each group in order), so a
    stage's own setting wins over an every-stage one whatever order they were given in."""
    settings = list(settings)
    return ([s for s in settings if s.stage is EVERY_STAGE]
            + [s for s in settings if s.stage is not EVERY_STAGE and s.stage == stage])


def sets(settings: Iterable[StageSetting], key: str, stage: str | None = None) -> bool:
    """Whether ``settings`` set ``key`` for ``stage`` (an every-stage setting counts) or, with ``stage`` ``None``,
    for any stage at all."""
    return any(s.key == key and (stage is None or s.applies_to(stage)) for s in settings)


def last_value(settings: Iterable[StageSetting], key: str, default: Any = None, stage: str | None = None) -> Any:
    """The value ``stage``'s config gets for ``key`` (the last that applies; every-stage ones first), or
    ``default``."""
    values = [s.value for s in for_stage(settings, stage) if s.key == key] if stage else \
        [s.value for s in settings if s.key == key and s.stage is EVERY_STAGE]
    return values[-1] if values else default


def apply_settings(data: Mapping[str, Any], settings: Sequence[StageSetting] | Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the config dict ``data`` with each setting's typed value at its dotted key (missing sections are
    created); ``settings`` may also be ``{dotted key: value}``. The stage prefix is not looked at: pick a stage's
    settings with :func:`for_stage` first."""
    import copy

    out = copy.deepcopy(dict(data))
    pairs = settings.items() if isinstance(settings, Mapping) else ((s.key, s.value) for s in settings)
    for key, value in pairs:
        set_dotted(out, key.split("."), value, key)
    return out
