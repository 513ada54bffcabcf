"""The peer row of the real-weights table: e5 on both sides trained by sentence-transformers' own trainer.

Its settings are ``care train baseline st-mnrl``'s shipped config (issue 15's 1 epoch, batch 32, lr 2e-5,
:data:`PEER_CONFIG`); :func:`peer_config` gives them with a training token budget, :func:`peer_settings` as the
records name them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from care.bench.reports.paths import ROOT
from care.train.recipes.st_mnrl import StMnrlConfig

#: The peer's settings: ``care train baseline st-mnrl``'s shipped config.
PEER_CONFIG = ROOT / "configs" / "baselines" / "st_mnrl" / "train.yaml"
#: The peer's row label.
PEER_ROW = "peer (sentence-transformers trainer)"
#: ``(name in the record, StMnrlConfig field)`` of the peer's settings a record keeps.
RECORDED_FIELDS = (("epochs", "epochs"), ("batch_size", "batch_size"), ("lr", "lr"), ("warmup", "warmup_ratio"),
                   ("scale", "scale"), ("max_length", "max_length"))


def peer_config(max_length: int | None = None) -> StMnrlConfig:
    """The peer's settings: the shipped st-mnrl config, with ``--max-length``."""
    config = StMnrlConfig.load(PEER_CONFIG)
    return replace(config, max_length=max_length) if max_length else config


def peer_settings(max_length: int | None = None) -> dict[str, Any]:
    """The peer's settings as the records name them (``epochs``, ``batch_size``, ``lr``, ``warmup``, ``scale``,
    ``max_length``)."""
    config = peer_config(max_length)
    return {name: getattr(config, field) for name, field in RECORDED_FIELDS}


#: The peer's settings as shipped (what a record that names none ran with).
PEER = peer_settings()
