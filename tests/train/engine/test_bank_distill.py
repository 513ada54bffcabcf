"""bank_distill: listwise distillation of the frozen teacher's ranking of a fixed document bank."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from care.errors import CareError
from care.train.engine.config import ConfigError, TrainConfig
from care.train.engine.losses import BankDistillLoss, CandidateBankKLLoss
from care.train.engine.stage import build_stage, teacher_query_key

from ..trainer_fixtures import tiny_config_dict, toy_rows


def _unit(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g), dim=-1)


def _kl_by_hand(q, tq, bank, tau_s, tau_t) -> float:
    total = 0.0
    for i in range(q.shape[0]):
        s = [float(q[i] @ b) / tau_s for b in bank]
        t = [float(tq[i] @ b) / tau_t for b in bank]
        zs, zt = sum(math.exp(x) for x in s), sum(math.exp(x) for x in t)
        total += sum((math.exp(b) / zt) * (b - math.log(zt) - a + math.log(zs)) for a, b in zip(s, t))
    return total / q.shape[0]


def test_bank_kl_matches_formula_and_only_the_student_gets_gradient():
    q, tq, bank = _unit(3, 4, seed=0), _unit(3, 4, seed=1), _unit(7, 4, seed=2)
    q.requires_grad_(True)
    tq.requires_grad_(True)
    loss = CandidateBankKLLoss(0.5, teacher_temperature=0.25)
    loss.set_bank(bank)
    value = loss(q, tq)
    assert value.item() == pytest.approx(_kl_by_hand(q.detach(), tq.detach(), bank, 0.5, 0.25), rel=1e-5)
    value.backward()
    assert q.grad is not None and q.grad.abs().sum() > 0 and tq.grad is None
    assert "bank" not in loss.state_dict()  # rebuilt from the teacher cache, never checkpointed


def test_bank_kl_needs_a_bank_of_the_right_width():
    loss = CandidateBankKLLoss(0.1)
    with pytest.raises(CareError, match="no candidate bank"):
        loss(_unit(2, 4, seed=0), _unit(2, 4, seed=1))
    with pytest.raises(CareError, match="non-empty"):
        loss.set_bank(torch.empty(0, 4))
    loss.set_bank(_unit(5, 8, seed=2))
    with pytest.raises(CareError, match="4-d but the bank holds 8-d"):
        loss(_unit(2, 4, seed=0), _unit(2, 4, seed=1))


def test_bank_distill_is_weighted_kl_plus_mse_and_zero_at_the_teacher():
    q, tq, bank = _unit(4, 6, seed=3), _unit(4, 6, seed=4), _unit(9, 6, seed=5)
    loss = BankDistillLoss(0.1, lambda_distill=2.0, lambda_mse=0.5)
    loss.set_bank(bank)
    out = loss(q, tq)
    kl = _kl_by_hand(q, tq, bank, 0.1, 0.1)
    mse = float(((q - tq) ** 2).sum(dim=-1).mean())
    assert out.components["distill"].item() == pytest.approx(kl, rel=1e-5)
    assert out.components["mse"].item() == pytest.approx(mse, rel=1e-5)
    assert out.loss.item() == pytest.approx(2.0 * kl + 0.5 * mse, rel=1e-5)
    assert loss(tq, tq).loss.item() == pytest.approx(0.0, abs=1e-5)


def _config(tmp_path, **loss) -> TrainConfig:
    return TrainConfig.from_dict({"stage": "bank_distill", "output_dir": str(tmp_path),
                                  "model": {"query_model": "q", "document_model": "d", "teacher": {"kind": "document"}},
                                  "data": {"train_file": "t.jsonl"}, "loss": loss})


def test_bank_texts_are_every_document_or_a_seeded_subset(tmp_path):
    from care.data.training import TrainingExample

    rows = [TrainingExample(query="头痛", pos=("布洛芬",), neg=("补液", "休息")),
            TrainingExample(query="发烧", pos=("退烧", "布洛芬"))]
    stage = build_stage(_config(tmp_path))
    assert stage.candidate_bank and stage.field_towers == {"query": "query", "teacher_query": "teacher"}
    assert stage.bank_texts(rows, None, 0) == sorted(["布洛芬", "补液", "休息", "退烧"])
    subset = stage.bank_texts(rows, 2, 7)
    assert len(subset) == 2 and subset == stage.bank_texts(rows, 2, 7) and set(subset) <= {"布洛芬", "补液", "休息", "退烧"}
    # the teacher embeds the queries (as queries) and every bank document
    bank = stage.bank_texts(rows, None, 0)
    texts = stage.teacher_texts(rows, None, bank)
    assert set(texts) - set(bank) == {teacher_query_key("头痛", None, None), teacher_query_key("发烧", None, None)}
    with pytest.raises(CareError, match="does not use a candidate bank"):
        build_stage(TrainConfig.from_dict({**_config(tmp_path).to_dict(), "stage": "kale_align"})).set_candidate_bank(
            torch.ones(1, 2))


def test_the_bank_can_come_from_a_corpus_or_another_training_file(tmp_path):
    from care.data.errors import DataFormatError
    from care.data.io import write_jsonl
    from care.data.training import TrainingExample

    queries_only = [TrainingExample(query="头痛", pos=("头痛",), type="query_align")]  # alignment rows: no documents
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [{"id": "d1", "text": "布洛芬"}, {"id": "d2", "text": "补液"}, {"id": "d3", "text": "补液 "},
                         {"id": "d4", "title": "退烧", "text": "多喝水"}])
    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, [{"query": "发烧", "pos": ["退烧"], "neg": ["休息"]}, {"query": "头痛", "pos": ["退烧"]}])
    stage = build_stage(_config(tmp_path))
    assert stage.bank_texts(queries_only, None, 0, str(corpus)) == ["布洛芬", "补液", "补液 ", "退烧 多喝水"]  # title + text
    assert stage.bank_texts(queries_only, None, 0, str(pairs)) == ["休息", "退烧"]
    assert stage.bank_texts(queries_only, None, 0) == ["头痛"]  # without a bank file: the rows' own pos
    with pytest.raises(DataFormatError, match="does not exist"):
        stage.bank_texts(queries_only, None, 0, str(tmp_path / "missing.jsonl"))
    write_jsonl(tmp_path / "bad.jsonl", [{"id": "d1", "text": "布洛芬"}, {"id": "d2"}])
    with pytest.raises(DataFormatError, match=r"bad.jsonl.*line 2"):
        stage.bank_texts(queries_only, None, 0, str(tmp_path / "bad.jsonl"))


def test_bank_distill_config_checks(tmp_path):
    with pytest.raises(ConfigError, match="data.bank_file"):
        TrainConfig.from_dict({**_config(tmp_path).to_dict(), "stage": "stage1", "data": {"train_file": "t.jsonl",
                                                                                         "bank_file": "c.jsonl"}})
    with pytest.raises(ConfigError, match="loss.bank_size"):
        _config(tmp_path, bank_size=0)
    with pytest.raises(ConfigError, match="lambda_distill"):
        _config(tmp_path, lambda_distill=0.0, lambda_mse=0.0)
    assert TrainConfig.from_dict(_config(tmp_path, bank_size=3).to_dict()).loss.bank_size == 3


@pytest.fixture(scope="module")
def pruned(tiny_dir, tmp_path_factory):
    from care.models.prune import prune_layers

    return prune_layers(tiny_dir / "tiny-qwen3", 1, tmp_path_factory.mktemp("pruned") / "qwen3-1")


def test_bank_distill_trains_the_query_tower_and_pairs_it_with_the_frozen_teacher(tiny_dir, pruned, tmp_path):
    import json

    from sentence_transformers import SentenceTransformer

    from care.train.engine.trainer import read_result, train

    torch.set_num_threads(1)
    config = TrainConfig.from_dict(tiny_config_dict(
        tiny_dir, "bank_distill", tmp_path / "bank", data={"n_negatives": 0},
        model={"query_model": str(pruned), "query_pooling": "lasttoken", "query_prompt": "Q: "}))
    result = train(config)
    assert read_result(tmp_path / "bank").completed and result.global_step == 6
    logged = [json.loads(line) for line in (tmp_path / "bank" / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1]["loss"] < logged[0]["loss"]  # the same 8 rows every step: the KL + MSE must fall
    n_docs = len({t for r in toy_rows() for t in (*r["pos"], *r["neg"])})
    cache = list((tmp_path / "bank" / "teacher_cache").rglob("embeddings.npy"))
    import numpy as np

    assert len(cache) == 1 and np.load(cache[0]).shape[0] == n_docs + len(toy_rows())  # bank + the queries
    care = SentenceTransformer(result.care_model, device="cpu")  # trained query tower + frozen document tower
    assert care.encode_query(["头痛"]).shape == care.encode_document(["头痛"]).shape == (1, 128)


def test_bank_distill_ranks_a_bank_file_for_queries_without_labels(tiny_dir, pruned, tmp_path):
    import numpy as np

    from care.data.io import write_jsonl
    from care.train.engine.trainer import read_result, train

    torch.set_num_threads(1)
    queries = tmp_path / "queries.jsonl"  # Stage I alignment rows: the text is its own "pos"
    write_jsonl(queries, [{"query": q, "pos": [q], "type": "query_align"} for q in ("头痛", "发烧", "咳嗽", "腹泻")])
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [{"id": str(i), "text": t} for i, t in enumerate(("布洛芬止痛", "多喝水", "止咳糖浆", "补液盐"))])
    config = TrainConfig.from_dict(tiny_config_dict(
        tiny_dir, "bank_distill", tmp_path / "bank", data={"n_negatives": 0, "train_file": str(queries),
                                                          "bank_file": str(corpus)},
        optim={"batch_size": 2, "max_steps": 2},
        model={"query_model": str(pruned), "query_pooling": "lasttoken", "query_prompt": "Q: "}))
    train(config)
    assert read_result(tmp_path / "bank").completed
    cache = list((tmp_path / "bank" / "teacher_cache").rglob("embeddings.npy"))
    assert len(cache) == 1 and np.load(cache[0]).shape[0] == 4 + 4  # the corpus bank + the 4 queries, no query as a document
