"""Listwise distillation over a fixed bank of documents: the student query encoder learns the frozen
teacher's *ranking* of every document of the training file, not only of one batch's candidates.

Not one of the paper's objectives: this project's second part of Stage I for real-weight towers
(recipe stage ``stage1_rank``), added because aligning vectors (Stage I's MSE + Asym-InfoNCE) did not
reproduce the ranking of an anisotropic document tower (``docs/lab-notes.md``, 2026-11-26)."""

from __future__ import annotations

import torch
from torch import nn

from care.errors import CareError
from care.train.engine.losses.combined import WeightedSum
from care.train.engine.losses.distill import ScoreDistillKLLoss
from care.train.engine.losses.mse import EmbeddingMSELoss
from care.train.engine.losses.output import LossOutput


class CandidateBankKLLoss(nn.Module):
    r"""KL from the teacher's to the student's softmax over a fixed candidate bank.

    Equation (``T`` the frozen teacher, ``E_s`` the student query encoder)::

        Bank = [T(d_1); ...; T(d_N)]                       (frozen document vectors, [N, d])
        s_i  = E_s(q_i) · Bankᵀ / τ_s ,   t_i = T(q_i) · Bankᵀ / τ_t
        L    = 1/B · Σ_i KL( softmax(t_i) ‖ softmax(s_i) )            ("batchmean")

    With the document side frozen, scoring a query against thousands of cached vectors costs one
    ``[B, d] × [d, N]`` product, so each query carries the teacher's whole ranking (in-batch KL,
    :class:`~care.train.engine.losses.CandidateKLLoss`, sees ``B`` candidates).

    Args:
        student_temperature: ``τ_s``.
        teacher_temperature: ``τ_t`` (``None``: ``τ_s``).

    The bank is set with :meth:`set_bank` before the first forward (the trainer does it from the
    teacher cache); it is a non-persistent buffer, rebuilt on resume.

    Forward:
        query ``[B, d]`` (student, L2-normalised), teacher_query ``[B, d]`` (teacher, not
        back-propagated). Returns a scalar.
    """

    def __init__(self, student_temperature: float, teacher_temperature: float | None = None) -> None:
        super().__init__()
        if student_temperature <= 0 or (teacher_temperature is not None and teacher_temperature <= 0):
            raise ValueError("temperatures must be > 0")
        self.student_temperature = float(student_temperature)
        self.teacher_temperature = float(student_temperature if teacher_temperature is None else teacher_temperature)
        self.kl = ScoreDistillKLLoss(1.0)  # logits arrive already divided by their temperatures
        self.register_buffer("bank", torch.empty(0, 0), persistent=False)

    def set_bank(self, bank: torch.Tensor) -> None:
        """Use ``bank`` (``[N, d]`` frozen document vectors) as every query's candidate list."""
        if bank.ndim != 2 or bank.shape[0] == 0:
            raise CareError(f"the candidate bank must be a non-empty [N, d] matrix, got {tuple(bank.shape)}")
        self.bank = bank.detach().float()

    def forward(self, query: torch.Tensor, teacher_query: torch.Tensor) -> torch.Tensor:
        if self.bank.numel() == 0:
            raise CareError("CandidateBankKLLoss: no candidate bank set (call set_bank first)")
        if query.shape[-1] != self.bank.shape[1]:
            raise CareError(f"query vectors are {query.shape[-1]}-d but the bank holds {self.bank.shape[1]}-d vectors")
        bank = self.bank.to(query.device)
        student = query.float() @ bank.T / self.student_temperature
        with torch.no_grad():
            teacher = teacher_query.detach().float() @ bank.T / self.teacher_temperature
        return self.kl(student, teacher)

    def extra_repr(self) -> str:
        return (f"student_temperature={self.student_temperature}, teacher_temperature={self.teacher_temperature}, "
                f"bank={tuple(self.bank.shape)}")


class BankDistillLoss(nn.Module):
    r"""``L = λ_distill · KL_bank(q) + λ2 · ‖norm(E_s(q)) − norm(T(q))‖²`` (:class:`CandidateBankKLLoss`
    plus :class:`~care.train.engine.losses.EmbeddingMSELoss` towards the teacher's own query vector; the MSE
    keeps the student's vectors in the teacher's space, the KL teaches the ranking). A zero weight
    skips its term.

    Forward:
        query ``[B, d]``, teacher_query ``[B, d]``. Returns :class:`LossOutput` with components
        ``"distill"`` and ``"mse"`` (the active ones).
    """

    def __init__(self, temperature: float, teacher_temperature: float | None = None, *, lambda_distill: float = 1.0,
                 lambda_mse: float = 1.0) -> None:
        super().__init__()
        self.bank_kl = CandidateBankKLLoss(temperature, teacher_temperature)
        self.terms = WeightedSum({"distill": (lambda_distill, self.bank_kl), "mse": (lambda_mse, EmbeddingMSELoss())})

    def set_bank(self, bank: torch.Tensor) -> None:
        self.bank_kl.set_bank(bank)

    def forward(self, query: torch.Tensor, teacher_query: torch.Tensor) -> LossOutput:
        return self.terms(distill=(query, teacher_query), mse=(query, teacher_query))
