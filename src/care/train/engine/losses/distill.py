"""Score distillation (a paper baseline): match the student's candidate distribution to a teacher's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from care.train.engine.losses.infonce import STAGE_TWO_TEMPERATURE, InfoNCELoss
from care.train.engine.losses.output import LossOutput

#: Default softmax temperature for the teacher/student score distributions.
DEFAULT_DISTILL_TEMPERATURE = 0.02


class ScoreDistillKLLoss(nn.Module):
    r"""KL divergence from the teacher's to the student's softmax over each query's candidate list.

    Equation::

        p_t = softmax(t_i / τ),  p_s = softmax(s_i / τ)
        L_KL = 1/B * sum_i sum_c p_t[i,c] · (log p_t[i,c] - log p_s[i,c])      ("batchmean")

    No ``τ²`` factor is applied (add it through the weight if you want Hinton's scaling).

    Args:
        temperature: ``τ`` applied to both score matrices.

    Forward:
        student_scores ``[B, C]`` (e.g. cosine of the student's query and candidate vectors),
        teacher_scores ``[B, C]`` (the teacher's scores of the same candidates in the same order;
        not back-propagated). Returns a scalar.
    """

    def __init__(self, temperature: float = DEFAULT_DISTILL_TEMPERATURE) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def forward(self, student_scores: torch.Tensor, teacher_scores: torch.Tensor) -> torch.Tensor:
        if student_scores.shape != teacher_scores.shape or student_scores.ndim != 2:
            raise ValueError(f"student {tuple(student_scores.shape)} and teacher {tuple(teacher_scores.shape)} "
                             "scores must both be [B, C]")
        log_p_s = F.log_softmax(student_scores.float() / self.temperature, dim=-1)
        log_p_t = F.log_softmax(teacher_scores.detach().float() / self.temperature, dim=-1)
        return F.kl_div(log_p_s, log_p_t, log_target=True, reduction="batchmean")

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"


class ScoreDistillLoss(nn.Module):
    r"""The score-distillation baseline: ``λ_kl · KL(p_t || p_s) + λ_nce · InfoNCE``.

    The student's candidate list for query ``i`` is its own positive followed by its own ``k`` hard
    negatives: ``s_i = [q_i·p_i, q_i·n_{i,1}, ..., q_i·n_{i,k}]``; ``teacher_scores`` must use that
    order (``[B, 1 + k]``). InfoNCE uses all in-batch candidates as in :class:`InfoNCELoss`.
    A zero weight skips its term.

    Forward:
        query ``[B, d]``, positive ``[B, d]``, negatives ``[B, k, d]``, teacher_scores ``[B, 1+k]``.
        Returns :class:`LossOutput` with components ``"kl"`` and ``"infonce"``.
    """

    def __init__(self, kl_temperature: float = DEFAULT_DISTILL_TEMPERATURE,
                 nce_temperature: float = STAGE_TWO_TEMPERATURE, lambda_kl: float = 1.0,
                 lambda_nce: float = 1.0, gather_across_devices: bool = False) -> None:
        super().__init__()
        if lambda_kl < 0 or lambda_nce < 0 or not (lambda_kl or lambda_nce):
            raise ValueError(f"weights must be >= 0 and not both zero, got kl={lambda_kl}, nce={lambda_nce}")
        self.lambda_kl, self.lambda_nce = float(lambda_kl), float(lambda_nce)
        self.kl = ScoreDistillKLLoss(kl_temperature)
        self.infonce = InfoNCELoss(nce_temperature, gather_across_devices)

    @staticmethod
    def student_scores(query: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """``[B, 1+k]`` scores of each query against its own positive then its own negatives."""
        candidates = torch.cat([positive.unsqueeze(1), negatives], dim=1)  # [B, 1+k, d]
        return torch.einsum("bd,bcd->bc", query, candidates)

    def forward(self, query: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor,
                teacher_scores: torch.Tensor) -> LossOutput:
        total = query.new_zeros(())
        components: dict[str, torch.Tensor] = {}
        if self.lambda_kl:
            kl = self.kl(self.student_scores(query, positive, negatives), teacher_scores)
            components["kl"] = kl.detach()
            total = total + self.lambda_kl * kl
        if self.lambda_nce:
            nce = self.infonce(query, positive, negatives)
            components["infonce"] = nce.detach()
            total = total + self.lambda_nce * nce
        return LossOutput(total, components)
