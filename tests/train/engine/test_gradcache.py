"""GradCache gives the same parameter gradients as one full-batch pass."""

from __future__ import annotations

import torch

from care.train.engine.config import ModelConfig
from care.train.engine.gradcache import EncodeJob, grad_cache_step, slice_features
from care.train.engine.losses import InfoNCELoss
from care.train.engine.towers import Towers, load_query_tower

from ..trainer_fixtures import PAIRS


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_grad_cache_equals_full_batch(tiny_dir):
    torch.set_num_threads(1)
    tower = load_query_tower(ModelConfig(query_model=str(tiny_dir / "tiny-bert"), query_max_seq_length=32))
    model = Towers({"query": tower}).eval()  # no dropout: both paths see identical activations
    loss_fn = InfoNCELoss(temperature=0.05)
    queries = [q for q, _ in PAIRS]
    docs = [d for _, d in PAIRS]
    jobs = [EncodeJob("query", "query", tower.preprocess(queries), len(queries)),
            EncodeJob("positive", "query", tower.preprocess(docs), len(docs))]

    def loss_of(embeddings):
        return loss_fn(embeddings["query"], embeddings["positive"])

    full = loss_of({job.name: model(job.tower, job.features) for job in jobs})
    full.backward()
    reference = _grads(model)
    model.zero_grad(set_to_none=True)

    cached = grad_cache_step(jobs, model, loss_of, chunk_size=3, backward=lambda loss: loss.backward(),
                             device=torch.device("cpu"))
    assert torch.allclose(cached, full.detach(), atol=1e-6)
    got = _grads(model)
    assert got.keys() == reference.keys() and reference
    for name, grad in reference.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_chunk_rerun_restores_dropout_rng(tmp_path):
    """With dropout on, each re-run chunk reproduces the embeddings of the no-grad pass exactly."""
    import dataclasses

    from care.models.presets import TINY_BERT, make_tiny_models

    torch.set_num_threads(1)
    with_dropout = dataclasses.replace(TINY_BERT, hidden_dropout_prob=0.1)  # the tiny preset has none
    query_dir, _ = make_tiny_models([t for pair in PAIRS for t in pair], tmp_path, query_shape=with_dropout)
    tower = load_query_tower(ModelConfig(query_model=str(query_dir), query_max_seq_length=32))
    model = Towers({"query": tower}).train()
    texts = [q for q, _ in PAIRS]
    features = tower.preprocess(texts)
    seen: list[torch.Tensor] = []

    def encode(name, feats):
        emb = model(name, feats)
        seen.append(emb.detach().clone())
        return emb

    job = EncodeJob("query", "query", features, len(texts))
    grad_cache_step([job], encode, lambda e: (e["query"] ** 2).sum(), chunk_size=4,
                    backward=lambda loss: loss.backward(), device=torch.device("cpu"))
    first, rerun = seen[:2], seen[2:]
    assert len(rerun) == 2
    for a, b in zip(first, rerun):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # and dropout is really active: a fresh pass gives different vectors
    assert not torch.allclose(model("query", slice_features(features, 0, 4)), first[0])
