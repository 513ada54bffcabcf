"""AdamW for the training loops: the fused kernel where it exists, the same update as PyTorch's default."""

from __future__ import annotations

import copy

import pytest
import torch

from care.errors import CareError
from care.train.engine.optimizer import adamw


def _one_step(fused: bool | None, *, theta: float = 1.0, grad: float = 0.5, lr: float = 0.1, decay: float = 0.01):
    param = torch.nn.Parameter(torch.tensor([theta]))
    optimizer = adamw([{"params": [param], "weight_decay": decay}], lr=lr, betas=[0.9, 0.999], eps=1e-8, fused=fused)
    param.grad = torch.tensor([grad])
    optimizer.step()
    return optimizer, float(param.detach())


@pytest.mark.parametrize("fused", [None, True, False])
def test_one_step_is_adamw_by_hand(fused):
    # first step: m_hat = g, v_hat = g^2, so theta <- theta (1 - lr lambda) - lr g / (|g| + eps)
    optimizer, theta = _one_step(fused)
    assert theta == pytest.approx(1.0 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8), abs=1e-7)
    assert bool(optimizer.defaults["fused"]) is (fused is not False)  # CPU float parameters: fused unless refused


def test_fused_and_default_agree_over_many_steps():
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(300, 16, generator=generator)
    grads = [torch.randn(300, 16, generator=generator) for _ in range(30)]
    out = {}
    for fused in (True, False):
        param = torch.nn.Parameter(start.clone())
        bias = torch.nn.Parameter(torch.zeros(16))
        optimizer = adamw([{"params": [param], "weight_decay": 0.01}, {"params": [bias], "weight_decay": 0.0}],
                          lr=1e-3, betas=(0.9, 0.999), eps=1e-8, fused=fused)
        for grad in grads:
            param.grad, bias.grad = grad, grad.mean(0)
            optimizer.step()
        out[fused] = (param.detach(), bias.detach())
    for a, b in zip(out[True], out[False]):
        assert torch.allclose(a, b, atol=1e-6)
    assert not torch.equal(out[True][0], start)  # it did train


def test_a_parameter_without_the_kernel_falls_back_or_is_refused_when_fused_is_required():
    meta = torch.nn.Parameter(torch.zeros(2, device="meta"))
    assert not adamw([{"params": [meta]}], lr=0.1, betas=(0.9, 0.999), eps=1e-8).defaults["fused"]
    with pytest.raises(CareError, match=r"runtime.fused_optimizer is true, but there is a torch.float32 parameter on meta"):
        adamw([{"params": [meta]}], lr=0.1, betas=(0.9, 0.999), eps=1e-8, fused=True)


def test_a_resumed_checkpoint_keeps_the_kernel_the_run_asked_for_and_the_same_update():
    from care.train.engine.optimizer import keep_kernel_choice

    def fresh(fused):
        param = torch.nn.Parameter(torch.linspace(-1, 1, 8))
        return param, adamw([{"params": [param], "weight_decay": 0.01}], lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                            fused=fused)

    old_param, old = fresh(False)  # checkpointed by a run on PyTorch's default loop
    for step in range(3):
        old_param.grad = torch.full((8,), 0.1 * (step + 1))
        old.step()
    saved = copy.deepcopy(old.state_dict())  # as read back from a checkpoint file: no tensor shared
    param, resumed = fresh(None)
    with torch.no_grad():
        param.copy_(old_param)
    resumed.load_state_dict(saved)
    assert not resumed.param_groups[0]["fused"]  # what load_state_dict alone leaves
    keep_kernel_choice(resumed)
    assert resumed.param_groups[0]["fused"] is True
    old_param.grad = param.grad = torch.full((8,), 0.4)
    old.step()
    resumed.step()
    assert torch.allclose(param, old_param, atol=1e-7)  # the moments carried over: the same fourth update
