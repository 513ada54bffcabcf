"""Loading the towers a stage trains: frozen token embeddings for large-vocabulary students."""

from __future__ import annotations

import torch

from care.train.engine.config import ModelConfig
from care.train.engine.towers import load_query_tower


def _embedding_and_rest(model):
    embedding = model[0].auto_model.get_input_embeddings().weight
    rest = [p for p in model.parameters() if p is not embedding]
    return embedding, rest


def test_query_embeddings_train_by_default(tiny_dir) -> None:
    embedding, rest = _embedding_and_rest(load_query_tower(ModelConfig(query_model=str(tiny_dir / "tiny-bert"))))
    assert embedding.requires_grad and all(p.requires_grad for p in rest)


def test_freeze_query_embeddings_freezes_only_the_token_table(tiny_dir) -> None:
    cfg = ModelConfig(query_model=str(tiny_dir / "tiny-bert"), freeze_query_embeddings=True)
    embedding, rest = _embedding_and_rest(load_query_tower(cfg))
    assert not embedding.requires_grad
    assert rest and all(p.requires_grad for p in rest)


def test_a_16_bit_query_checkpoint_trains_in_fp32(tiny_dir, tmp_path) -> None:
    """transformers loads the stored dtype; the trained tower must still hold fp32 master weights."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    half = tmp_path / "bert-bf16"
    AutoModel.from_pretrained(str(tiny_dir / "tiny-bert")).to(torch.bfloat16).save_pretrained(half)
    AutoTokenizer.from_pretrained(str(tiny_dir / "tiny-bert")).save_pretrained(half)
    model = load_query_tower(ModelConfig(query_model=str(half)))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_training_device_follows_the_runtime(monkeypatch) -> None:
    from care.train.engine.config import RuntimeConfig
    from care.train.engine.towers import training_device

    assert training_device(RuntimeConfig(cpu=True)) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert training_device(RuntimeConfig()) == "cuda:3"  # each launched process mines on its own GPU
    assert training_device(RuntimeConfig(cpu=True)) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert training_device(RuntimeConfig()) == "cpu"
