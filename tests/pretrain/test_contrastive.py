"""Contrastive pretraining: InfoNCE against a hand computation, learnable τ, GradCache, saved encoder."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from care.pretrain.config import PretrainConfig
from care.pretrain.contrastive import InBatchContrastiveLoss
from care.pretrain.trainer import pretrain

from .fixtures import TEXTS, config_dict


def _unit(*rows):
    t = torch.tensor(rows, dtype=torch.float32)
    return t / t.norm(dim=1, keepdim=True)


def test_loss_equals_hand_computed_infonce():
    a = _unit([1.0, 0.0], [0.6, 0.8], [0.0, 1.0])
    b = _unit([0.8, 0.6], [0.0, 1.0], [1.0, 1.0])
    tau = 0.5
    expected = 0.0
    for i in range(3):
        sims = [float(a[i] @ b[j]) for j in range(3)]
        expected += -math.log(math.exp(sims[i] / tau) / sum(math.exp(s / tau) for s in sims))
    expected /= 3
    for learnable in (False, True):
        loss = InBatchContrastiveLoss(tau, learnable=learnable, min_temperature=0.01, max_temperature=1.0)
        assert float(loss(a, b).detach()) == pytest.approx(expected, rel=1e-5)


def test_learnable_temperature_gets_gradient_and_clamps():
    torch.manual_seed(0)
    a, b = F.normalize(torch.randn(6, 8), dim=1), F.normalize(torch.randn(6, 8), dim=1)
    learn = InBatchContrastiveLoss(0.05, learnable=True, min_temperature=0.01, max_temperature=1.0)
    assert [n for n, _ in learn.named_parameters()] == ["log_temperature"]
    learn(a, b).backward()
    grad = learn.log_temperature.grad
    assert grad is not None and float(grad.abs()) > 0
    # analytic check: logits are s/τ = s·exp(-θ), so dL/dθ = (1/B) Σ_i (s_ii/τ - E_softmax[s_i/τ])
    s = a @ b.T / 0.05
    p = s.softmax(dim=1)
    analytic = (s.diagonal() - (p * s).sum(1)).mean()
    assert float(grad) == pytest.approx(float(analytic), rel=1e-4)

    fixed = InBatchContrastiveLoss(0.05, learnable=False)
    assert list(fixed.parameters()) == [] and "log_temperature" in dict(fixed.named_buffers())

    with torch.no_grad():
        learn.log_temperature.fill_(math.log(5.0))
    assert float(learn.temperature.detach()) == pytest.approx(1.0)  # forward clamps
    learn.clamp_()
    assert float(learn.log_temperature.detach()) == pytest.approx(0.0)


@pytest.mark.parametrize("learn", [False, True])
def test_pretrain_learns_pairs_and_saves_plain_encoder(tiny_root, tiny_bert, tmp_path, learn):
    from transformers import AutoModel

    from care.models.query import build_query_encoder

    torch.set_num_threads(1)
    cfg = PretrainConfig.from_dict(config_dict(
        "contrastive", tiny_bert, tiny_root / "pairs.jsonl", tmp_path / "run",
        contrastive={"temperature": 0.1, "learn_temperature": learn},
        optim={"batch_size": 8, "max_steps": 15, "lr": 3e-3, "warmup_ratio": 0.0}))
    result = pretrain(cfg)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["loss"] < 0.5 * rows[0]["loss"]
    temps = {round(r["loss/temperature"], 6) for r in rows}
    assert (len(temps) > 1) is learn  # τ moves only when learnable
    assert result.extra["learn_temperature"] is learn
    folder = tmp_path / "run" / "model"
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["BertModel"]
    AutoModel.from_pretrained(folder)
    tower = build_query_encoder(folder, max_seq_length=32)
    titles = [t.split("。")[0] + "。" for t in TEXTS]
    contents = [t.split("。", 1)[1] for t in TEXTS]
    sims = torch.as_tensor(tower.encode(titles)) @ torch.as_tensor(tower.encode(contents)).T
    assert (sims.argmax(dim=1) == torch.arange(len(TEXTS))).float().mean() >= 0.75


def test_grad_cache_matches_full_batch(tiny_root, tiny_bert, tmp_path):
    from safetensors.torch import load_file

    torch.set_num_threads(1)
    weights = {}
    for chunk in (None, 3):
        cfg = PretrainConfig.from_dict(config_dict(
            "contrastive", tiny_bert, tiny_root / "pairs.jsonl", tmp_path / f"run{chunk}",
            contrastive={"learn_temperature": True, "grad_cache_chunk_size": chunk},
            optim={"batch_size": 8, "max_steps": 2}))
        pretrain(cfg)
        weights[chunk] = load_file(tmp_path / f"run{chunk}" / "model" / "model.safetensors")
        weights[f"t{chunk}"] = json.loads((tmp_path / f"run{chunk}" / "pretrain_result.json").read_text())
    for name, value in weights[None].items():
        if name.endswith("attention.self.key.bias"):
            # softmax is invariant to the key bias: its true gradient is 0, and AdamW turns the two runs'
            # float noise (~1e-9) into full-size, unrelated steps
            continue
        torch.testing.assert_close(weights[3][name], value, atol=2e-5, rtol=1e-4, msg=name)
    assert weights["t3"]["extra"]["temperature"] == pytest.approx(weights["tNone"]["extra"]["temperature"], rel=1e-5)
