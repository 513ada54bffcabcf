"""Shared tiny models for the model tests: built once per session from a few Chinese medical texts."""

from __future__ import annotations

import pytest
import torch

TEXTS = [
    "头痛怎么办？最近总是偏头痛，晚上睡不好。",
    "高血压患者应该吃什么药？血压150/95需要治疗吗",
    "糖尿病饮食注意事项：少吃糖，多运动。",
    "hypertension 和 diabetes 是常见的慢性病",
    "胃痛、反酸、烧心可能是胃食管反流病。",
    "ＣＴ检查显示肺部有结节，需要复查吗？",
]


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    from care.models.presets import make_tiny_models

    return make_tiny_models(TEXTS, tmp_path_factory.mktemp("tiny"), seed=0)


@pytest.fixture(scope="session")
def tiny_query_dir(tiny_dirs):
    return tiny_dirs[0]


@pytest.fixture(scope="session")
def tiny_document_dir(tiny_dirs):
    return tiny_dirs[1]


def _perturb_lora(model, seed: int = 0, std: float = 0.2) -> None:
    """LoRA B starts at zero (adapter is a no-op); give it values so adapter tests are meaningful."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * std)


@pytest.fixture(scope="session")
def perturb_lora():
    return _perturb_lora


@pytest.fixture(scope="session")
def texts():
    return list(TEXTS)
