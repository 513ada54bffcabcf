"""Embedding MSE: pull the query encoder's vector of a text onto the document encoder's vector of it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EmbeddingMSELoss(nn.Module):
    r"""Squared distance between the normalised embeddings of the same text under two encoders.

    Equation (paper, Stage I alignment term)::

        L_mse = 1/B * sum_i || norm(E_q(x_i)) - norm(E_d(x_i)) ||²_2

    i.e. the squared L2 distance is **summed over the d dimensions** and averaged over the batch.
    For unit vectors this equals ``1/B * sum_i (2 - 2·cos(E_q(x_i), E_d(x_i)))``, so its scale does
    not depend on ``d`` and ``λ1 = λ2 = 1`` balances it against InfoNCE as in the paper (a
    per-element mean, ``torch.nn.MSELoss``'s default, would be ``d`` times smaller).

    Args:
        normalize: L2-normalise both inputs first (idempotent for already-normalised vectors).

    Forward:
        student ``[B, d]`` (``E_q(x)``), target ``[B, d]`` (``E_d(x)``). Returns a scalar.
    """

    def __init__(self, normalize: bool = True) -> None:
        super().__init__()
        self.normalize = normalize

    def forward(self, student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if student.shape != target.shape:
            raise ValueError(f"student {tuple(student.shape)} and target {tuple(target.shape)} must have the same shape")
        if self.normalize:
            student, target = F.normalize(student, dim=-1), F.normalize(target, dim=-1)
        return (student - target).pow(2).sum(dim=-1).mean()

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}"
