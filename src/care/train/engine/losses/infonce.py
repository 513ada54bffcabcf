"""InfoNCE with in-batch, hard and (optionally) cross-device negatives, and CARE's Asym-InfoNCE."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from care.train.engine.distributed import gather_with_grad_and_sizes, is_distributed
from care.train.engine.distributed import rank as current_rank

#: Stage II temperature of the paper (and FlagEmbedding's default for fine-tuning).
STAGE_TWO_TEMPERATURE = 0.02
#: Stage I (query alignment) temperature of the paper.
STAGE_ONE_TEMPERATURE = 0.1


def _check_shapes(query: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor | None) -> None:
    if query.ndim != 2 or positive.ndim != 2:
        raise ValueError(f"query and positive must be [B, d]; got {tuple(query.shape)} and {tuple(positive.shape)}")
    if query.shape != positive.shape:
        raise ValueError(
            f"query {tuple(query.shape)} and positive {tuple(positive.shape)} must have the same shape "
            "(one positive per query, same embedding width; truncate the wider side with MatryoshkaLoss "
            "or the model's output dim)"
        )
    if negatives is not None and (negatives.ndim != 3 or negatives.shape[0] != query.shape[0]
                                  or negatives.shape[2] != query.shape[1]):
        raise ValueError(f"negatives must be [B, k, d] = [{query.shape[0]}, k, {query.shape[1]}]; "
                         f"got {tuple(negatives.shape)}")


class InfoNCELoss(nn.Module):
    r"""Contrastive cross-entropy of each query against every candidate in the (global) batch.

    Equation (paper Sec. 4, FlagEmbedding's fine-tuning loss)::

        L = -1/B * sum_i log( exp(s(q_i, p_i)/τ) / sum_{c in C} exp(s(q_i, c)/τ) ),   s(a, b) = a·b

    where the candidate set ``C`` is every in-batch positive ``p_1..p_B`` plus every in-batch hard
    negative ``n_{j,1..k}`` (``B + B·k`` candidates); with ``gather_across_devices`` the positives
    and negatives of all ranks are added (``W·B + W·B·k``) and the label of local query ``i`` on
    rank ``r`` is ``offset_r + i`` (see :mod:`care.train.engine.distributed` for the gradient scaling).

    Inputs are expected L2-normalised (the models end with a ``Normalize`` module), so ``s`` is the
    cosine similarity; nothing is normalised here.

    Args:
        temperature: ``τ`` (0.02 in the paper's Stage II, 0.1 in Stage I).
        gather_across_devices: add other ranks' positives and negatives as candidates (no-op
            when ``torch.distributed`` is not initialised).
        share_hard_negatives: True (FlagEmbedding's default) scores each query against all
            queries' hard negatives; False masks out other queries' hard negatives so that each
            query sees only its own hard negatives plus all in-batch positives.
        duplicate_threshold: mask every candidate ``c`` (other than query ``i``'s own positive)
            whose cosine to that positive is at least this value: a copy or near-copy of the
            positive in the batch (consultation answers are often near-duplicates) is not a negative.
            ``None`` (default) masks nothing. The mask carries no gradient.

    Forward:
        query ``[B, d]``, positive ``[B, d]`` (row ``i`` is query ``i``'s positive),
        negatives ``[B, k, d]`` or ``None`` (in-batch negatives only). Returns a scalar: the mean
        over this rank's ``B`` queries.
    """

    def __init__(self, temperature: float = STAGE_TWO_TEMPERATURE, gather_across_devices: bool = False,
                 share_hard_negatives: bool = True, duplicate_threshold: float | None = None) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.gather_across_devices = gather_across_devices
        self.share_hard_negatives = share_hard_negatives
        self.duplicate_threshold = duplicate_threshold

    def scores_and_labels(self, query: torch.Tensor, positive: torch.Tensor,
                          negatives: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the ``[B, |C|]`` float32 logits ``s/τ`` (masked entries ``-inf``) and the ``[B]`` labels."""
        _check_shapes(query, positive, negatives)
        batch, dim = query.shape
        gather = self.gather_across_devices and is_distributed()
        if gather:
            all_pos, sizes = gather_with_grad_and_sizes(positive)
            offset = sum(sizes[: current_rank()])
        else:
            all_pos, offset = positive, 0
        candidates = [all_pos]
        k = 0 if negatives is None else negatives.shape[1]
        if k:
            flat = negatives.reshape(batch * k, dim)
            candidates.append(gather_with_grad_and_sizes(flat)[0] if gather else flat)
        # float32 logits: at τ = 0.02 bf16/fp16 scores lose too much precision for the softmax
        pool = torch.cat(candidates, dim=0)
        logits = (query @ pool.T).float() / self.temperature
        labels = torch.arange(offset, offset + batch, device=query.device)
        if self.duplicate_threshold is not None:
            with torch.no_grad():
                copies = (positive @ pool.T).float() >= self.duplicate_threshold
                copies[torch.arange(batch, device=query.device), labels] = False
            logits = logits.masked_fill(copies, float("-inf"))
        if k and not self.share_hard_negatives:
            n_pos = all_pos.shape[0]
            owner = torch.arange(logits.shape[1] - n_pos, device=query.device) // k  # global query of each negative
            foreign = owner.unsqueeze(0) != labels.unsqueeze(1)
            logits = torch.cat([logits[:, :n_pos], logits[:, n_pos:].masked_fill(foreign, float("-inf"))], dim=1)
        return logits, labels

    def forward(self, query: torch.Tensor, positive: torch.Tensor,
                negatives: torch.Tensor | None = None) -> torch.Tensor:
        logits, labels = self.scores_and_labels(query, positive, negatives)
        return F.cross_entropy(logits, labels)

    def extra_repr(self) -> str:
        return (f"temperature={self.temperature}, gather_across_devices={self.gather_across_devices}, "
                f"share_hard_negatives={self.share_hard_negatives}, duplicate_threshold={self.duplicate_threshold}")


class AsymInfoNCELoss(InfoNCELoss):
    r"""CARE's Asym-InfoNCE: InfoNCE whose query side and candidate side come from different encoders.

    Equation (paper, Stage I and Stage II)::

        L_asym = -1/B * sum_i log( exp(E_q(q_i)·E_d(p_i)/τ) / sum_{c in C} exp(E_q(q_i)·E_d(c)/τ) )

    ``query`` must be the (small, online) query encoder's output ``E_q(·)``; ``positive`` and
    ``negatives`` the (large, offline) document encoder's ``E_d(·)``, cut to the query width. In
    Stage I each text is its own positive (``E_q(x)`` vs ``E_d(x)``, negatives ``E_d(x⁻)``) with
    ``τ = 0.1`` (:data:`STAGE_ONE_TEMPERATURE`); in Stage II ``(q, d⁺, d⁻)`` triples with
    ``τ = 0.02`` (:data:`STAGE_TWO_TEMPERATURE`), 7 hard negatives and cross-device negatives.
    The arithmetic is :class:`InfoNCELoss`'s; this class names the role of each argument.
    """
