"""The recipe's ``key=value`` settings as users write them: ``optim.lr=1e-4`` sets every stage,
``stage2:optim.lr=5e-5`` one stage. One module reads that syntax for the recipe, its variants, sweeps,
baselines and the query-latency budget.
"""

from __future__ import annotations

from collections.abc import Sequence


def override_stage(override: str) -> str | None:
    """The stage a ``<stage>:key=value`` override targets; ``None`` for a plain ``key=value`` (every stage)."""
    key = override.split("=", 1)[0]
    return key.split(":", 1)[0].strip() if ":" in key else None


def override_key(override: str) -> str:
    """The dotted key an override sets, without its stage (``stage2:optim.lr=5e-5`` -> ``optim.lr``)."""
    return override.split("=", 1)[0].rpartition(":")[2].strip()


def sets_key(overrides: Sequence[str], stage: str, key: str) -> bool:
    """Whether ``overrides`` set ``key`` (e.g. ``optim.epochs``) for every stage or for ``stage``."""
    return any(override_key(o) == key and override_stage(o) in (None, stage) for o in overrides)
