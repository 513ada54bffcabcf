"""What the real-weight scripts share (``bench_real_weights``, its diagnosis, ``bench_stage1_probe``,
``frontier_kit``, ``optimizer_speed``): the package's names, re-exported for them.

e5's conventions and cuts are :mod:`care.experiments.real_weights.towers`, the dev set's prepared split and the
scorer :mod:`care.experiments.real_weights.split`, the peer :mod:`care.experiments.real_weights.peer`.
:data:`LENGTH_OVERRIDES` is the one thing kept here: ``bench_real_weights --max-length`` fills it (the stages the
diagnosis trains read it as ``KEY=VALUE`` text).
"""

from __future__ import annotations

from care.experiments.real_weights import EXPERIMENT
from care.experiments.real_weights.peer import PEER, PEER_CONFIG, PEER_ROW, peer_config
from care.experiments.real_weights.split import (
    ALIGNMENT_SENTENCES,
    DUPLICATE_THRESHOLD,
    PROBE_FOLDER,
    VALIDATION_SEED,
    VALIDATION_SHARE,
    Prepared,
    finished,
    prepare,
    score_rows,
)
from care.experiments.real_weights.towers import (
    CONFIGS,
    DEMO_RETRIEVAL,
    E5_OPTIONS,
    QUERY_LAYERS,
    e5_cuts,
    e5_narrow,
    e5_spec,
    ensure_e5,
    model_spec,
    narrowed,
)

#: Token budget of both towers in training as ``KEY=VALUE`` items (filled by ``bench_real_weights --max-length``).
LENGTH_OVERRIDES: list[str] = []

__all__ = ["ALIGNMENT_SENTENCES", "CONFIGS", "DEMO_RETRIEVAL", "DUPLICATE_THRESHOLD", "E5_OPTIONS", "EXPERIMENT",
           "LENGTH_OVERRIDES", "PEER", "PEER_CONFIG", "PEER_ROW", "PROBE_FOLDER", "QUERY_LAYERS", "VALIDATION_SEED",
           "VALIDATION_SHARE", "Prepared", "e5_cuts", "e5_narrow", "e5_spec", "ensure_e5", "finished", "model_spec",
           "narrowed", "peer_config", "prepare", "score_rows"]
