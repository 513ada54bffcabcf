"""AdamW for every training loop, with PyTorch's fused kernel where the parameters' device has one.

AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"): per parameter ``θ``,
``m ← β1 m + (1-β1) g``, ``v ← β2 v + (1-β2) g²``, ``θ ← θ - lr (m̂ / (√v̂ + ε) + λ θ)``.

PyTorch runs it one of three ways with the same arithmetic: a Python loop over the parameters (its default on
the CPU), ``foreach`` (grouped tensor ops) or ``fused`` (one kernel per step). On the CPU the loop took about a
third of a Stage I step of a 1-layer e5 query tower (a profile, docs/lab-notes.md, 2026-11-30), mostly the update
of the 250k-row embedding matrix; with the fused kernel the step is 1.5x faster, measured side by side
(``benchmarks/optimizer_speed.py`` -> ``benchmarks/results/optimizer_speed/``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from care.errors import CareError

logger = logging.getLogger(__name__)


#: Parameter-name fragments exempt from weight decay (HF convention); 0-d parameters (a learnable temperature)
#: are exempt too.
NO_DECAY: tuple[str, ...] = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


def decay_groups(named_parameters: Iterable[tuple[str, torch.nn.Parameter]], *, lr: float, weight_decay: float,
                 own_lr: Callable[[str], float | None] | None = None) -> list[dict[str, Any]]:
    """AdamW param groups of the trainable parameters: ``weight_decay`` except biases, norms and scalars.

    Args:
        named_parameters: ``(name, parameter)`` pairs (``module.named_parameters()``, several chained).
        own_lr: ``name -> lr`` for parameters at a learning rate of their own (``None``: ``lr``); they get groups
            of their own, after the ``lr`` groups.
    Returns:
        the non-empty groups in the order (lr, decay), (lr, no decay), (own lr, decay), (own lr, no decay),
        each ``{"params", "weight_decay", "lr"}``; ``[]`` when nothing trains.
    """
    groups: dict[tuple[float | None, bool], list[torch.nn.Parameter]] = {}
    for name, param in named_parameters:
        if not param.requires_grad:
            continue
        decay = not (any(k in name for k in NO_DECAY) or param.ndim == 0)
        groups.setdefault((own_lr(name) if own_lr else None, decay), []).append(param)
    order = sorted(groups, key=lambda key: (key[0] is not None, not key[1]))
    return [{"params": groups[key], "weight_decay": weight_decay if key[1] else 0.0,
             "lr": lr if key[0] is None else key[0]} for key in order]


#: Device types whose floating-point parameters AdamW's fused kernel takes (PyTorch lists more; these two are the
#: ones this package trains on and tests).
FUSED_DEVICES: tuple[str, ...] = ("cpu", "cuda")


def _fusable(groups: list[dict[str, Any]]) -> str | None:
    """``None`` when every parameter suits the fused kernel, else why not (the first that does not)."""
    for group in groups:
        for param in group["params"]:
            if param.device.type not in FUSED_DEVICES or not torch.is_floating_point(param):
                return f"a {param.dtype} parameter on {param.device.type} (the fused kernel takes floating point on {', '.join(FUSED_DEVICES)})"
    return None


def adamw(param_groups: Iterable[dict[str, Any]], *, lr: float, betas: Sequence[float], eps: float,
          fused: bool | None = None) -> torch.optim.AdamW:
    """AdamW over ``param_groups`` (each ``{"params": [...], "weight_decay": ..., ...}``).

    Args:
        fused: ``None``: the fused kernel when every parameter is a floating-point tensor on a device of
            :data:`FUSED_DEVICES`, else PyTorch's default; ``True``: fused, or fail; ``False``: PyTorch's
            default (the per-parameter loop on the CPU, ``foreach`` on CUDA).
    Raises:
        CareError: ``fused=True`` and a parameter the fused kernel does not take.
    """
    groups = [dict(group, params=list(group["params"])) for group in param_groups]
    settings = {"lr": lr, "betas": tuple(betas), "eps": eps}
    unsuitable = _fusable(groups) if fused is not False else "not asked for"
    if unsuitable and fused:
        raise CareError(f"runtime.fused_optimizer is true, but there is {unsuitable}; set it to null or false")
    if unsuitable:
        logger.debug("AdamW without the fused kernel: %s", unsuitable)
        return torch.optim.AdamW(groups, **settings)
    return torch.optim.AdamW(groups, **settings, fused=True)


#: The param-group keys that choose AdamW's implementation, not its arithmetic.
KERNEL_KEYS: tuple[str, ...] = ("fused", "foreach")


def keep_kernel_choice(optimizer: torch.optim.Optimizer) -> None:
    """After a checkpoint's state is loaded into ``optimizer`` (an optimizer built by :func:`adamw`, or one that
    wraps it, as accelerate's does), put back the implementation it was built with: ``load_state_dict`` copies
    each param group's ``fused`` / ``foreach`` flags from the checkpoint, so a run checkpointed with PyTorch's
    default loop would resume on it whatever ``runtime.fused_optimizer`` says now."""
    inner = getattr(optimizer, "optimizer", optimizer)
    for group in inner.param_groups:
        for key in KERNEL_KEYS:
            if key in inner.defaults:
                group[key] = inner.defaults[key]
