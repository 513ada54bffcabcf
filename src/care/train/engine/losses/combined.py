"""Weighted sums of named loss terms, and CARE's Stage I objective."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from care.train.engine.losses.infonce import STAGE_ONE_TEMPERATURE, AsymInfoNCELoss
from care.train.engine.losses.mse import EmbeddingMSELoss
from care.train.engine.losses.output import LossOutput

TermInputs = tuple[Any, ...] | Mapping[str, Any]


class WeightedSum(nn.Module):
    r"""``L = sum_t λ_t · L_t(inputs_t)`` over named terms; a term with ``λ_t = 0`` is never computed.

    Args:
        terms: ``{name: (weight, loss_module)}``. At least one weight must be non-zero.

    Forward:
        One keyword argument per *active* term, named like the term, holding that term's inputs as
        a tuple of positional arguments or a mapping of keyword arguments, e.g.
        ``loss(contrastive=(q, d, d_neg), mse=(q, d))``. Inputs of zero-weight terms may be omitted.
        Returns :class:`LossOutput` (total, ``{name: unweighted detached value}``).
    """

    def __init__(self, terms: Mapping[str, tuple[float, nn.Module]]) -> None:
        super().__init__()
        if not terms:
            raise ValueError("WeightedSum needs at least one term")
        self.weights = {name: float(weight) for name, (weight, _) in terms.items()}
        if any(w < 0 for w in self.weights.values()) or not any(self.weights.values()):
            raise ValueError(f"weights must be >= 0 and not all zero, got {self.weights}")
        self.terms = nn.ModuleDict({name: module for name, (_, module) in terms.items()})

    @property
    def active(self) -> list[str]:
        """Names of the terms that are computed (non-zero weight)."""
        return [name for name, w in self.weights.items() if w != 0]

    def forward(self, **inputs: TermInputs) -> LossOutput:
        total: torch.Tensor | None = None
        components: dict[str, torch.Tensor] = {}
        for name in self.active:
            if name not in inputs:
                raise ValueError(f"missing inputs for loss term '{name}' (pass {name}=(...))")
            given = inputs[name]
            value = self.terms[name](**given) if isinstance(given, Mapping) else self.terms[name](*given)
            components[name] = value.detach()
            weighted = self.weights[name] * value
            total = weighted if total is None else total + weighted
        assert total is not None  # guaranteed by the constructor
        return LossOutput(total, components)

    def extra_repr(self) -> str:
        return f"weights={self.weights}"


class StageOneLoss(nn.Module):
    r"""CARE Stage I (query alignment) objective.

    Equation (paper, Stage I; ``E_d`` frozen, each text ``x`` its own positive)::

        L_I = λ1 · L_asym(E_q(x), E_d(x), E_d(x⁻)) + λ2 · || norm(E_q(x)) - norm(E_d(x)) ||²

    with :class:`AsymInfoNCELoss` at ``τ = 0.1`` and :class:`EmbeddingMSELoss` (squared distance
    summed over dims, mean over the batch), ``λ1 = λ2 = 1``. The same loss serves query-side
    ``(q, q, q⁻)`` and document-side ``(d, d, d⁻)`` alignment batches. Setting a λ to 0 drops that
    term (it is not computed), for ablations. ``duplicate_threshold`` masks the candidates whose frozen
    vector ``E_d(c)`` is at least this cosine-similar to ``E_d(x)``: a near-copy of ``x`` (search titles
    repeat one another) is not a negative, and pushing ``E_q(x)`` away from it fights the MSE term.

    Forward:
        query_side ``[B, d]`` = ``E_q(x)``, doc_side ``[B, d]`` = ``E_d(x)``, doc_negatives
        ``[B, k, d]`` = ``E_d(x⁻)`` or ``None`` (in-batch negatives only). Returns
        :class:`LossOutput` with components ``"contrastive"`` and ``"mse"`` (the active ones).
    """

    def __init__(self, temperature: float = STAGE_ONE_TEMPERATURE, lambda_contrastive: float = 1.0,
                 lambda_mse: float = 1.0, gather_across_devices: bool = False,
                 duplicate_threshold: float | None = None) -> None:
        super().__init__()
        contrastive = AsymInfoNCELoss(temperature, gather_across_devices, duplicate_threshold=duplicate_threshold)
        self.combined = WeightedSum({
            "contrastive": (lambda_contrastive, contrastive),
            "mse": (lambda_mse, EmbeddingMSELoss()),
        })

    def forward(self, query_side: torch.Tensor, doc_side: torch.Tensor,
                doc_negatives: torch.Tensor | None = None) -> LossOutput:
        return self.combined(contrastive=(query_side, doc_side, doc_negatives), mse=(query_side, doc_side))
