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

The paper's efficient-retrieval baselines (:mod:`care.train.baselines`) add *teacher fields*: the
texts of a batch field embedded again by the frozen, cached teacher (``teacher_query`` = the query
text as the student sees it, ``teacher_positive``, ``teacher_negative``):

=============  ===========  ==========================  =============================================
stage          student E_s  teacher fields              loss
=============  ===========  ==========================  =============================================
kale_align     query        query, positive, negative   KL(softmax(T(q)·T(C)/τ_t) ‖ softmax(E_s(q)·T(C)/τ_s))
embed_distill  query        query                       ‖E_s(q) − T(q)‖² (Wang & Lyu)
score_distill  q, pos, neg  query, positive, negative   λ_distill·KL(teacher ‖ student scores) + λ1·InfoNCE
=============  ===========  ==========================  =============================================

(``C`` = in-batch positives + hard negatives; ``T`` = the frozen teacher.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from care.train.config import TEACHER_STAGES, TrainConfig

FIELDS: tuple[str, ...] = ("query", "positive", "negative")
QUERY_TOWER, DOCUMENT_TOWER, TEACHER = "query", "document", "teacher"
#: Teacher fields of the baseline stages: the same texts as the batch field, embedded by the teacher.
TEACHER_FIELD_SOURCES: dict[str, str] = {"teacher_query": "query", "teacher_positive": "positive",
                                         "teacher_negative": "negative"}
_KL_ARGS = ("query", "positive", "negative", "teacher_query", "teacher_positive", "teacher_negative")

_FIELD_TOWERS: dict[str, dict[str, str]] = {
    "init_query": {"query": QUERY_TOWER, "positive": QUERY_TOWER, "negative": QUERY_TOWER},
    "init_document": {"query": DOCUMENT_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER},
    "stage1": {"query": QUERY_TOWER, "positive": TEACHER, "negative": TEACHER},
    "stage1_sft": {"query": QUERY_TOWER, "positive": TEACHER, "negative": TEACHER},
    "stage2": {"query": QUERY_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER},
    "kale_align": {"query": QUERY_TOWER, "positive": TEACHER, "negative": TEACHER, "teacher_query": TEACHER},
    "embed_distill": {"query": QUERY_TOWER, "teacher_query": TEACHER},
    "score_distill": {"query": QUERY_TOWER, "positive": QUERY_TOWER, "negative": QUERY_TOWER,
                      "teacher_query": TEACHER, "teacher_positive": TEACHER, "teacher_negative": TEACHER},
}
#: Fields passed positionally to each stage's loss (default :data:`FIELDS`). In ``kale_align`` the
#: student's candidates are the teacher's: ``positive``/``negative`` are passed twice.
_LOSS_ARGS: dict[str, tuple[str, ...]] = {
    "kale_align": ("query", "positive", "negative", "teacher_query", "positive", "negative"),
    "embed_distill": ("query", "teacher_query"),
    "score_distill": _KL_ARGS,
}


def source_field(name: str) -> str:
    """The batch field (query / positive / negative) whose texts the field ``name`` encodes."""
    return TEACHER_FIELD_SOURCES.get(name, name)


@dataclass
class StageSpec:
    """One stage: field → tower routing plus the loss.

    Attributes:
        name: stage name (see :data:`care.train.config.STAGES`).
        field_towers: ``{field: "query" | "document" | "teacher"}``.
        loss: ``nn.Module`` called with the embeddings of ``loss_args`` in order (by default
            ``loss(query [B,d], positive [B,d], negatives [B,k,d] | None)``; any field whose source is
            ``negative`` is reshaped to ``[B, k, d]``); returns a tensor or a
            :class:`~care.train.losses.LossOutput`.
        loss_args: field names passed positionally to ``loss``.
    """

    name: str
    field_towers: dict[str, str]
    loss: nn.Module
    loss_args: tuple[str, ...] = field(default=FIELDS)

    @property
    def trainable_towers(self) -> tuple[str, ...]:
        """Towers that receive gradients (the teacher never does)."""
        return tuple(t for t in (QUERY_TOWER, DOCUMENT_TOWER) if t in self.field_towers.values())

    @property
    def uses_teacher(self) -> bool:
        return TEACHER in self.field_towers.values()

    @property
    def teacher_scores_only(self) -> bool:
        """True when the teacher's vectors only meet each other (``score_distill``: the student encodes its
        own candidates): the teacher's width is free, and the student is not paired with it as a CARE model."""
        return self.uses_teacher and self.field_towers.get("positive") == QUERY_TOWER

    def batch_texts(self, texts: Mapping[str, list[str]]) -> dict[str, list[str]]:
        """``{field: texts}`` of every field this stage encodes, from the batch's ``query`` /
        ``positive`` / ``negative`` texts (a field whose texts are empty, e.g. no negatives, is left out)."""
        return {name: list(texts[source_field(name)]) for name in self.field_towers if texts[source_field(name)]}

    def teacher_texts(self, examples: Iterable, query_prompt: str | None) -> list[str]:
        """Every distinct text the frozen teacher must embed for ``examples`` (sorted).

        ``positive``/``negative`` teacher fields need all of a row's ``pos`` and ``neg`` (the hard
        negatives are sampled per epoch); a ``query`` teacher field needs each row's query exactly as
        the student sees it (instruction applied, :func:`care.train.batches.query_text`).
        """
        from care.train.batches import query_text

        sources = {source_field(n) for n, tower in self.field_towers.items() if tower == TEACHER}
        texts: set[str] = set()
        for ex in examples:
            if sources & {"positive", "negative"}:
                texts.update(ex.pos)
                texts.update(ex.neg)
            if "query" in sources:
                texts.add(query_text(ex.query, ex.prompt, ex.type, query_prompt))
        return sorted(texts)

    def compute_loss(self, embeddings: Mapping[str, torch.Tensor], n_negatives: int):
        """Apply the loss to ``{field: embeddings}``; negatives ``[B·k, d]`` are reshaped to ``[B, k, d]``."""
        batch = embeddings["query"].shape[0]
        args = []
        for name in self.loss_args:
            value = embeddings.get(name)
            if source_field(name) == "negative":
                value = value.reshape(batch, n_negatives, value.shape[-1]) if value is not None and n_negatives > 0 \
                    else None
            args.append(value)
        return self.loss(*args)


def build_stage(config: TrainConfig) -> StageSpec:
    """The :class:`StageSpec` of ``config.stage`` with its loss built from ``config.loss``."""
    from care.train.losses import (
        AsymInfoNCELoss,
        CandidateKLLoss,
        EmbeddingMSELoss,
        InBatchScoreDistillLoss,
        InfoNCELoss,
        MatryoshkaLoss,
        StageOneLoss,
    )

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
    elif stage == "kale_align":
        loss = CandidateKLLoss(lc.temperature, lc.teacher_temperature, gather_across_devices=lc.gather_across_devices)
    elif stage == "embed_distill":
        loss = EmbeddingMSELoss()
    elif stage == "score_distill":
        loss = InBatchScoreDistillLoss(lc.temperature, lc.teacher_temperature, lambda_kl=lc.lambda_distill,
                                       lambda_nce=lc.lambda_contrastive,
                                       gather_across_devices=lc.gather_across_devices)
    else:  # stage1_sft, stage2
        loss = AsymInfoNCELoss(lc.temperature, gather_across_devices=lc.gather_across_devices)
    spec = StageSpec(stage, dict(_FIELD_TOWERS[stage]), loss, _LOSS_ARGS.get(stage, FIELDS))
    assert spec.uses_teacher == (stage in TEACHER_STAGES)
    return spec
