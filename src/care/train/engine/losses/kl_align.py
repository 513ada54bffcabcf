"""KL alignment over the in-batch candidate set (KALE's objective; the KL half of score distillation)."""

from __future__ import annotations

import torch
from torch import nn

from care.train.engine.losses.distill import ScoreDistillKLLoss
from care.train.engine.losses.infonce import InfoNCELoss

#: Teacher softmax temperature when none is given: the student's.
SAME_TEMPERATURE = None


class CandidateKLLoss(nn.Module):
    r"""KL from the teacher's to the student's distribution over each query's (global) batch candidates.

    Equation (KALE, Campos et al. 2023; the KL term of score distillation)::

        C   = {p_1..p_B} ∪ {n_{j,1..k}}                         (in-batch positives + hard negatives)
        s_i = [ q_i · c  for c in C ] / τ_s                       (student query vs student-side candidates)
        t_i = [ q̂_i · ĉ  for ĉ in Ĉ ] / τ_t                       (teacher query vs teacher candidates)
        L   = 1/B · Σ_i KL( softmax(t_i) || softmax(s_i) )        ("batchmean")

    The candidate lists come from :meth:`InfoNCELoss.scores_and_labels` on both sides, so the order
    (and, with ``gather_across_devices``, the other ranks' candidates) is identical for teacher and
    student. In KALE the student's candidates *are* the frozen document encoder's vectors (only the
    query side differs); in score distillation the student encodes its own candidates.

    Args:
        student_temperature: ``τ_s``.
        teacher_temperature: ``τ_t`` (``None``: ``τ_s``).
        gather_across_devices: add other ranks' candidates (no-op without ``torch.distributed``).

    Forward:
        query ``[B, d]``, positive ``[B, d]``, negatives ``[B, k, d]`` or ``None`` (student side);
        teacher_query ``[B, d']``, teacher_positive ``[B, d']``, teacher_negatives ``[B, k, d']`` or
        ``None`` (teacher side, not back-propagated; ``d'`` may differ from ``d``). Returns a scalar.
    """

    def __init__(self, student_temperature: float, teacher_temperature: float | None = SAME_TEMPERATURE,
                 gather_across_devices: bool = False) -> None:
        super().__init__()
        teacher_temperature = student_temperature if teacher_temperature is None else teacher_temperature
        self.student = InfoNCELoss(student_temperature, gather_across_devices)
        self.teacher = InfoNCELoss(teacher_temperature, gather_across_devices)
        self.kl = ScoreDistillKLLoss(1.0)  # logits arrive already divided by their temperatures

    def forward(self, query: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor | None,
                teacher_query: torch.Tensor, teacher_positive: torch.Tensor,
                teacher_negatives: torch.Tensor | None) -> torch.Tensor:
        if (negatives is None) != (teacher_negatives is None):
            raise ValueError("student and teacher must both have hard negatives or both have none")
        student_logits, _ = self.student.scores_and_labels(query, positive, negatives)
        with torch.no_grad():
            teacher_logits, _ = self.teacher.scores_and_labels(
                teacher_query.detach(), teacher_positive.detach(),
                None if teacher_negatives is None else teacher_negatives.detach())
        return self.kl(student_logits, teacher_logits)

    def extra_repr(self) -> str:
        return f"student_temperature={self.student.temperature}, teacher_temperature={self.teacher.temperature}"


class InBatchScoreDistillLoss(nn.Module):
    r"""Score distillation into a symmetric student: ``λ_kl · KL(p_t || p_s) + λ_nce · InfoNCE``.

    Equation (the paper's score-distillation baseline)::

        L = λ_kl · L_KL(student q/candidates, teacher q/candidates; τ_s, τ_t)   (:class:`CandidateKLLoss`)
          + λ_nce · L_InfoNCE(q, p, n; τ_s)                                     (:class:`InfoNCELoss`)

    over the same candidate set (in-batch positives + hard negatives). Unlike
    :class:`~care.train.engine.losses.ScoreDistillLoss` (teacher scores of each query's own ``1 + k``
    candidates, read from the training file) the teacher here is a frozen encoder whose query and
    candidate vectors are given, so in-batch candidates are distilled too. A zero weight skips its
    term entirely (not computed).

    Forward:
        query, positive, negatives (student side), teacher_query, teacher_positive,
        teacher_negatives (teacher side). Returns :class:`LossOutput` with components ``"kl"`` and
        ``"infonce"`` (the active ones).
    """

    def __init__(self, student_temperature: float, teacher_temperature: float | None = SAME_TEMPERATURE,
                 lambda_kl: float = 1.0, lambda_nce: float = 1.0, gather_across_devices: bool = False) -> None:
        super().__init__()
        from care.train.engine.losses.combined import WeightedSum

        self.combined = WeightedSum({
            "kl": (lambda_kl, CandidateKLLoss(student_temperature, teacher_temperature, gather_across_devices)),
            "infonce": (lambda_nce, InfoNCELoss(student_temperature, gather_across_devices)),
        })

    def forward(self, query: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor | None,
                teacher_query: torch.Tensor, teacher_positive: torch.Tensor,
                teacher_negatives: torch.Tensor | None):
        return self.combined(kl=(query, positive, negatives, teacher_query, teacher_positive, teacher_negatives),
                             infonce=(query, positive, negatives))
