"""What each training stage encodes with which tower, and which loss it optimises.

A batch has three fields (see :mod:`care.train.batches`): ``query`` (``B`` texts), ``positive``
(``B``) and ``negative`` (``B·k``, query-major). A :class:`StageSpec` maps each field to a tower —
``"query"`` (E_q), ``"document"`` (E_d), or ``"teacher"`` (frozen, cached E_d / any Encoder) — and
builds the loss from :mod:`care.train.losses`:

============  =================  ==================  ================================================
stage         query field        positive/negative   loss
============  =================  ==================  ================================================
init_query    E_q                E_q                 InfoNCE (symmetric), τ = loss.temperature
init_document E_d                E_d                 MatryoshkaLoss(InfoNCE, loss.matryoshka_dims)
stage1        E_q                teacher (frozen)    λ1·Asym-InfoNCE + λ2·MSE  (StageOneLoss, τ≈0.1)
stage1_sft    E_q                teacher (frozen)    Asym-InfoNCE of E_q(q) vs teacher(d⁺, d⁻)
stage2        E_q                E_d                 Asym-InfoNCE, hard + in-batch (+ cross-device)
============  =================  ==================  ================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from care.train.config import TEACHER_STAGES, TrainConfig

FIELDS: tuple[str, ...] = ("query", "positive", "negative")
QUERY_TOWER, DOCUMENT_TOWER, TEACHER = "query", "document", "teacher"

_FIELD_TOWERS: dict[str, dict[str, str]] = {
    "init_query": {"query": QUERY_TOWER, "positive": QUERY_TOWER, "negative": QUERY_TOWER},
    "init_document": {"query": DOCUMENT_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER},
    "stage1": {"query": QUERY_TOWER, "positive": TEACHER, "negative": TEACHER},
    "stage1_sft": {"query": QUERY_TOWER, "positive": TEACHER, "negative": TEACHER},
    "stage2": {"query": QUERY_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER},
}


@dataclass
class StageSpec:
    """One stage: field → tower routing plus the loss.

    Attributes:
        name: stage name (see :data:`care.train.config.STAGES`).
        field_towers: ``{field: "query" | "document" | "teacher"}``.
        loss: ``nn.Module`` called as ``loss(query [B,d], positive [B,d], negatives [B,k,d] | None)``;
            returns a tensor or a :class:`~care.train.losses.LossOutput`.
    """

    name: str
    field_towers: dict[str, str]
    loss: nn.Module

    @property
    def trainable_towers(self) -> tuple[str, ...]:
        """Towers that receive gradients (the teacher never does)."""
        return tuple(t for t in (QUERY_TOWER, DOCUMENT_TOWER) if t in self.field_towers.values())

    @property
    def uses_teacher(self) -> bool:
        return TEACHER in self.field_towers.values()

    def compute_loss(self, embeddings: Mapping[str, torch.Tensor], n_negatives: int):
        """Apply the loss to ``{field: embeddings}``; negatives ``[B·k, d]`` are reshaped to ``[B, k, d]``."""
        query, positive = embeddings["query"], embeddings["positive"]
        negatives = embeddings.get("negative")
        if negatives is not None and n_negatives > 0:
            negatives = negatives.reshape(query.shape[0], n_negatives, negatives.shape[-1])
        else:
            negatives = None
        return self.loss(query, positive, negatives)


def build_stage(config: TrainConfig) -> StageSpec:
    """The :class:`StageSpec` of ``config.stage`` with its loss built from ``config.loss``."""
    from care.train.losses import AsymInfoNCELoss, InfoNCELoss, MatryoshkaLoss, StageOneLoss

    lc = config.loss
    stage = config.stage
    if stage == "init_query":
        loss: nn.Module = InfoNCELoss(lc.temperature, gather_across_devices=lc.gather_across_devices)
    elif stage == "init_document":
        loss = InfoNCELoss(lc.temperature, gather_across_devices=lc.gather_across_devices)
        if lc.matryoshka_dims:
            loss = MatryoshkaLoss(loss, lc.matryoshka_dims)
    elif stage == "stage1":
        loss = StageOneLoss(lc.temperature, lc.lambda_contrastive, lc.lambda_mse,
                            gather_across_devices=lc.gather_across_devices)
    else:  # stage1_sft, stage2
        loss = AsymInfoNCELoss(lc.temperature, gather_across_devices=lc.gather_across_devices)
    spec = StageSpec(stage, dict(_FIELD_TOWERS[stage]), loss)
    assert spec.uses_teacher == (stage in TEACHER_STAGES)
    return spec
