r"""Unsupervised contrastive pretraining: InfoNCE on text pairs with in-batch negatives.

The paper's second initialisation step of the query encoder trains on (title, content) pairs: each
title must pick its own content among the batch's contents::

    L = -1/B · Σ_i log( exp(s(a_i, b_i)/τ) / Σ_j exp(s(a_i, b_j)/τ) ),   s = cosine (L2-normalised)

with ``j`` over the batch's second texts (and, with ``gather_across_devices``, every rank's). The
similarity matrix and labels come from :class:`care.train.engine.losses.InfoNCELoss` (temperature 1), so
cross-device negatives behave as in CARE's training. τ is either fixed or **learnable**:
``τ = clamp(exp(θ), τ_min, τ_max)`` with ``θ = log τ₀`` a trained scalar (log-parameterised like
CLIP's logit scale, so it stays positive), also clamped in place after every optimiser step.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from care.train.engine.losses.infonce import InfoNCELoss


class InBatchContrastiveLoss(nn.Module):
    """InfoNCE of ``a_i`` against ``b_1..b_B`` (in-batch negatives), τ fixed or learnable.

    Args:
        temperature: τ (the initial value when learnable).
        learnable: train ``θ = log τ`` as a parameter (otherwise a buffer).
        min_temperature, max_temperature: clamp range of τ.
        gather_across_devices: add other ranks' ``b`` as negatives (no-op outside torch.distributed).
    Forward:
        ``a``, ``b``: ``[B, d]`` L2-normalised embeddings (row ``i`` of ``b`` is ``a_i``'s positive);
        returns the scalar mean loss.
    """

    def __init__(self, temperature: float = 0.05, *, learnable: bool = False, min_temperature: float = 0.01,
                 max_temperature: float = 1.0, gather_across_devices: bool = False) -> None:
        super().__init__()
        if not 0 < min_temperature <= temperature <= max_temperature:
            raise ValueError(f"temperature {temperature} must lie in [{min_temperature}, {max_temperature}] (> 0)")
        self.min_temperature, self.max_temperature = float(min_temperature), float(max_temperature)
        self.learnable = learnable
        log_t = torch.tensor(math.log(temperature), dtype=torch.float32)
        if learnable:
            self.log_temperature = nn.Parameter(log_t)
        else:
            self.register_buffer("log_temperature", log_t)
        self.scorer = InfoNCELoss(temperature=1.0, gather_across_devices=gather_across_devices)

    @property
    def temperature(self) -> torch.Tensor:
        """Current τ (a tensor; differentiable w.r.t. ``log_temperature`` when learnable)."""
        return self.log_temperature.exp().clamp(self.min_temperature, self.max_temperature)

    def logits_and_labels(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, |candidates|]`` logits ``s/τ`` and the ``[B]`` labels."""
        scores, labels = self.scorer.scores_and_labels(a, b)
        return scores / self.temperature, labels

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        logits, labels = self.logits_and_labels(a, b)
        return F.cross_entropy(logits, labels)

    @torch.no_grad()
    def clamp_(self) -> None:
        """Keep ``θ`` inside ``[log τ_min, log τ_max]`` (call after each optimiser step)."""
        self.log_temperature.clamp_(math.log(self.min_temperature), math.log(self.max_temperature))

    def extra_repr(self) -> str:
        return (f"temperature={float(self.temperature):.4g}, learnable={self.learnable}, "
                f"range=[{self.min_temperature}, {self.max_temperature}]")


class EncoderModule(nn.Module):
    """A SentenceTransformer query encoder as a module: ``forward(features) -> [n, d]`` embeddings."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, features: dict) -> torch.Tensor:
        return self.encoder(features)["sentence_embedding"]
