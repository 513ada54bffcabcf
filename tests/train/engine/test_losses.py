"""Each loss against its formula on hand-computed tensors (the arithmetic is written out)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from care.train.engine.losses import (
    AsymInfoNCELoss,
    EmbeddingMSELoss,
    InfoNCELoss,
    LossOutput,
    MatryoshkaLoss,
    ScoreDistillKLLoss,
    ScoreDistillLoss,
    StageOneLoss,
    WeightedSum,
)

Q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
P = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
N = torch.tensor([[[0.6, 0.8]], [[0.8, 0.6]]])  # one hard negative per query


def unit(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g), dim=-1)


def test_infonce_in_batch_only_hand_computed() -> None:
    # τ = 0.5: q1 scores [1, 0] / 0.5 = [2, 0]; -log(e^2 / (e^2 + e^0)) = log(1 + e^-2). q2 symmetric.
    loss = InfoNCELoss(temperature=0.5)(Q, P)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-2)), rel=1e-6)


def test_infonce_with_shared_hard_negatives_hand_computed() -> None:
    # τ = 1, candidates [p1, p2, n1, n2]. q1 scores [1, 0, 0.6, 0.8]: loss = -1 + log(e + 1 + e^.6 + e^.8);
    # q2 scores [0, 1, 0.8, 0.6]: the same value, so the mean equals it.
    expected = -1 + math.log(math.e + 1 + math.exp(0.6) + math.exp(0.8))
    assert InfoNCELoss(temperature=1.0)(Q, P, N).item() == pytest.approx(expected, rel=1e-6)


def test_infonce_own_hard_negatives_only() -> None:
    # q1 keeps [p1, p2, n1] = [1, 0, 0.6]; q2 keeps [p1, p2, n2] = [0, 1, 0.6]: loss = -1 + log(e + 1 + e^.6).
    expected = -1 + math.log(math.e + 1 + math.exp(0.6))
    loss = InfoNCELoss(temperature=1.0, share_hard_negatives=False)(Q, P, N)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_infonce_matches_explicit_loop_at_paper_temperature() -> None:
    b, k, d, tau = 3, 2, 5, 0.02
    q, p, n = unit(b, d, seed=0), unit(b, d, seed=1), unit(b, k, d, seed=2)
    cands = torch.cat([p, n.reshape(b * k, d)])
    manual = sum(-(q[i] @ p[i] / tau) + torch.logsumexp(cands @ q[i] / tau, 0) for i in range(b)) / b
    assert InfoNCELoss(tau)(q, p, n).item() == pytest.approx(manual.item(), rel=1e-5)
    assert AsymInfoNCELoss(tau)(q, p, n).item() == pytest.approx(manual.item(), rel=1e-5)


def test_infonce_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="same shape"):
        InfoNCELoss()(unit(2, 4, seed=0), unit(2, 3, seed=1))
    with pytest.raises(ValueError, match="negatives must be"):
        InfoNCELoss()(unit(2, 4, seed=0), unit(2, 4, seed=1), unit(3, 1, 4, seed=2))
    with pytest.raises(ValueError, match="temperature"):
        InfoNCELoss(temperature=0)


def test_mse_sums_over_dims_and_averages_over_batch() -> None:
    # ||[1,0] - [0,1]||² = 1 + 1 = 2; ||[.6,.8] - [.6,.8]||² = 0; mean over 2 rows = 1.
    student = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    target = torch.tensor([[0.0, 1.0], [0.6, 0.8]])
    assert EmbeddingMSELoss()(student, target).item() == pytest.approx(1.0)
    # normalisation first: [2, 0] -> [1, 0], [0, 3] -> [0, 1]: same value.
    assert EmbeddingMSELoss()(student * torch.tensor([[2.0], [1.0]]), target * 3).item() == pytest.approx(1.0)
    # equals 2 - 2 cos for unit vectors
    a, b = unit(4, 6, seed=3), unit(4, 6, seed=4)
    assert EmbeddingMSELoss()(a, b).item() == pytest.approx((2 - 2 * (a * b).sum(-1)).mean().item(), rel=1e-5)


def test_matryoshka_equals_manual_loop() -> None:
    q, p, n = unit(3, 8, seed=5), unit(3, 8, seed=6), unit(3, 2, 8, seed=7)
    inner = InfoNCELoss(0.05)
    dims, weights = [2, 4, 8], [1.0, 2.0, 3.0]
    manual = sum(
        w * inner(F.normalize(q[:, :m], dim=-1), F.normalize(p[:, :m], dim=-1), F.normalize(n[..., :m], dim=-1))
        for m, w in zip(dims, weights)
    ) / sum(weights)
    assert MatryoshkaLoss(inner, dims, weights)(q, p, n).item() == pytest.approx(manual.item(), rel=1e-6)
    plain_mean = sum(inner(F.normalize(q[:, :m], dim=-1), F.normalize(p[:, :m], dim=-1)) for m in dims) / 3
    assert MatryoshkaLoss(inner, dims)(q, positive=p).item() == pytest.approx(plain_mean.item(), rel=1e-6)


def test_matryoshka_rejects_dim_wider_than_input() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        MatryoshkaLoss(InfoNCELoss(), [4, 16])(unit(2, 8, seed=0), unit(2, 8, seed=1))
    with pytest.raises(ValueError, match="weight"):
        MatryoshkaLoss(InfoNCELoss(), [4, 8], weights=[1.0])


def test_kl_hand_computed_and_against_kl_div() -> None:
    # τ = 1: p_s = softmax([0, 0]) = [.5, .5]; p_t = softmax([ln 3, 0]) = [.75, .25];
    # KL = .75 ln(.75/.5) + .25 ln(.25/.5) = .75 ln 1.5 - .25 ln 2.
    student = torch.tensor([[0.0, 0.0]])
    teacher = torch.tensor([[math.log(3.0), 0.0]])
    expected = 0.75 * math.log(1.5) - 0.25 * math.log(2.0)
    assert ScoreDistillKLLoss(1.0)(student, teacher).item() == pytest.approx(expected, rel=1e-6)

    s, t, tau = torch.randn(4, 5, generator=torch.Generator().manual_seed(8)), torch.randn(4, 5), 0.3
    p_t, log_p_s = F.softmax(t / tau, -1), F.log_softmax(s / tau, -1)
    by_hand = (p_t * (p_t.log() - log_p_s)).sum() / 4
    ours = ScoreDistillKLLoss(tau)(s, t)
    assert ours.item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert ours.item() == pytest.approx(F.kl_div(log_p_s, p_t, reduction="batchmean").item(), rel=1e-5)


def test_score_distill_composite() -> None:
    q, p, n = unit(3, 4, seed=9), unit(3, 4, seed=10), unit(3, 2, 4, seed=11)
    teacher = torch.randn(3, 3, generator=torch.Generator().manual_seed(12))
    student = torch.stack([torch.stack([q[i] @ p[i], q[i] @ n[i, 0], q[i] @ n[i, 1]]) for i in range(3)])
    out = ScoreDistillLoss(kl_temperature=0.5, nce_temperature=0.1, lambda_kl=2.0, lambda_nce=0.5)(q, p, n, teacher)
    kl = ScoreDistillKLLoss(0.5)(student, teacher)
    nce = InfoNCELoss(0.1)(q, p, n)
    assert out.loss.item() == pytest.approx((2.0 * kl + 0.5 * nce).item(), rel=1e-5)
    assert set(out.components) == {"kl", "infonce"}
    only_nce = ScoreDistillLoss(lambda_kl=0.0)(q, p, n, teacher)
    assert set(only_nce.components) == {"infonce"}


class CountingLoss(nn.Module):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value, self.calls = value, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x.sum() * 0 + self.value


def test_weighted_sum_and_zero_weight_skips_term() -> None:
    a, b = CountingLoss(2.0), CountingLoss(5.0)
    x = torch.ones(2, requires_grad=True)
    out = WeightedSum({"a": (0.5, a), "b": (0.0, b)})(a=(x,))
    assert isinstance(out, LossOutput)
    assert out.loss.item() == pytest.approx(1.0)  # 0.5 * 2 + (b skipped)
    assert (a.calls, b.calls) == (1, 0)
    assert set(out.components) == {"a"} and out.components["a"].item() == 2.0
    with pytest.raises(ValueError, match="missing inputs"):
        WeightedSum({"a": (1.0, a)})()
    with pytest.raises(ValueError, match="not all zero"):
        WeightedSum({"a": (0.0, a)})


def test_stage_one_loss_formula_and_ablations() -> None:
    q, d, dn = unit(4, 6, seed=13), unit(4, 6, seed=14), unit(4, 1, 6, seed=15)
    q.requires_grad_(True)
    out = StageOneLoss(temperature=0.1, lambda_contrastive=1.0, lambda_mse=1.0)(q, d, dn)
    nce = AsymInfoNCELoss(0.1)(q, d, dn)
    mse = EmbeddingMSELoss()(q, d)
    assert out.loss.item() == pytest.approx((nce + mse).item(), rel=1e-6)
    assert out.components["contrastive"].item() == pytest.approx(nce.item(), rel=1e-6)
    assert out.components["mse"].item() == pytest.approx(mse.item(), rel=1e-6)
    out.loss.backward()
    assert q.grad is not None and q.grad.abs().sum() > 0

    no_mse = StageOneLoss(lambda_mse=0.0)(q, d, dn)
    assert set(no_mse.components) == {"contrastive"}
    assert no_mse.loss.item() == pytest.approx(nce.item(), rel=1e-6)
    no_nce = StageOneLoss(lambda_contrastive=0.0, lambda_mse=2.0)(q, d)
    assert set(no_nce.components) == {"mse"}
    assert no_nce.loss.item() == pytest.approx(2 * mse.item(), rel=1e-6)


def test_low_precision_inputs_give_float32_loss() -> None:
    q, p, n = unit(4, 16, seed=16), unit(4, 16, seed=17), unit(4, 2, 16, seed=18)
    full = InfoNCELoss(0.02)(q, p, n)
    half = InfoNCELoss(0.02)(q.bfloat16(), p.bfloat16(), n.bfloat16())
    assert half.dtype == torch.float32
    assert half.item() == pytest.approx(full.item(), rel=0.05)


def test_infonce_masks_in_batch_copies_of_the_positive() -> None:
    """Rows 0 and 1 share one answer: each would otherwise push the other's copy of its own positive away.

    τ = 0.5, q = [e1, e1, e2], p = [e1, e1, e2]. Unmasked, q0 scores [2, 2, 0] and pays log(2 + e^-2);
    with the copy masked it scores [2, -inf, 0] and pays log(1 + e^-2); q2 is unaffected (log(1 + 2e^-2)).
    """
    q = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    plain = InfoNCELoss(temperature=0.5)(q, q).item()
    masked = InfoNCELoss(temperature=0.5, duplicate_threshold=0.99)(q, q).item()
    assert plain == pytest.approx((2 * math.log(2 + math.exp(-2)) + math.log(1 + 2 * math.exp(-2))) / 3, rel=1e-6)
    assert masked == pytest.approx((2 * math.log(1 + math.exp(-2)) + math.log(1 + 2 * math.exp(-2))) / 3, rel=1e-6)
    # each row's hard negative is a copy of its own positive: masked too; the others' (shared) negatives stay
    with_negatives = InfoNCELoss(temperature=0.5, duplicate_threshold=0.99)(q, q, q.unsqueeze(1)).item()
    assert with_negatives == pytest.approx((2 * math.log(1 + 2 * math.exp(-2)) + math.log(1 + 4 * math.exp(-2))) / 3,
                                           rel=1e-6)


def test_stage_one_masks_near_copies_of_the_aligned_text() -> None:
    """Stage I with ``duplicate_threshold``: a text whose frozen vector is a near-copy of x's is no negative.

    τ = 0.5, E_q = E_d = [e1, e1', e2] with cos(e1, e1') = 0.999: unmasked, rows 0 and 1 each count the
    other's near-copy as a negative; masked, each sees only its own vector and e2, the loss of
    AsymInfoNCE with the copies masked, which is lower; the MSE term is unchanged (zero here).
    """
    near = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.045], [0.0, 1.0]]), dim=-1)
    masked = StageOneLoss(temperature=0.5, duplicate_threshold=0.99)(near, near)
    plain = StageOneLoss(temperature=0.5)(near, near)
    expected = AsymInfoNCELoss(0.5, duplicate_threshold=0.99)(near, near)
    assert masked.components["contrastive"].item() == pytest.approx(expected.item(), rel=1e-6)
    assert masked.components["contrastive"].item() < plain.components["contrastive"].item()
    assert masked.components["mse"].item() == plain.components["mse"].item() == 0.0
