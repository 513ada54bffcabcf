"""Baseline losses against their formulas on tiny hand-made tensors, and the stages' field routing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from care.train.engine.config import TrainConfig
from care.train.engine.losses import CandidateKLLoss, EmbeddingMSELoss, InBatchScoreDistillLoss, InfoNCELoss
from care.train.engine.stage import TEACHER, build_stage


def _unit(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g), dim=-1)


def _kl_by_hand(q, p, n, tq, tp, tn, tau_s, tau_t) -> float:
    """Python loops: candidates = [p_1..p_B, n_11..n_Bk]; KL(p_t || p_s) averaged over queries."""
    cands = [p[i] for i in range(p.shape[0])] + [n[i, j] for i in range(n.shape[0]) for j in range(n.shape[1])]
    tcands = [tp[i] for i in range(tp.shape[0])] + [tn[i, j] for i in range(tn.shape[0]) for j in range(tn.shape[1])]
    total = 0.0
    for i in range(q.shape[0]):
        s = [float(q[i] @ c) / tau_s for c in cands]
        t = [float(tq[i] @ c) / tau_t for c in tcands]
        zs, zt = sum(math.exp(x) for x in s), sum(math.exp(x) for x in t)
        ps, pt = [math.exp(x) / zs for x in s], [math.exp(x) / zt for x in t]
        total += sum(a * (math.log(a) - math.log(b)) for a, b in zip(pt, ps))
    return total / q.shape[0]


def test_candidate_kl_matches_formula_and_only_student_gets_gradient():
    q, p, n = _unit(3, 4, seed=0), _unit(3, 4, seed=1), _unit(3, 2, 4, seed=2)
    tq, tp, tn = _unit(3, 6, seed=3), _unit(3, 6, seed=4), _unit(3, 2, 6, seed=5)  # teacher width may differ
    q.requires_grad_(True)
    tq.requires_grad_(True)
    loss = CandidateKLLoss(0.5, teacher_temperature=0.25)(q, p, n, tq, tp, tn)
    assert loss.item() == pytest.approx(_kl_by_hand(q.detach(), p, n, tq.detach(), tp, tn, 0.5, 0.25), rel=1e-5)
    loss.backward()
    assert q.grad is not None and q.grad.abs().sum() > 0
    assert tq.grad is None


def test_candidate_kl_is_zero_when_student_equals_teacher_and_default_teacher_temperature():
    q, p = _unit(4, 8, seed=0), _unit(4, 8, seed=1)
    loss = CandidateKLLoss(0.1)
    assert loss.teacher.temperature == 0.1
    assert loss(q, p, None, q, p, None).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="both have hard negatives"):
        loss(q, p, _unit(4, 1, 8, seed=2), q, p, None)


def test_in_batch_score_distill_is_weighted_kl_plus_infonce():
    q, p, n = _unit(3, 4, seed=0), _unit(3, 4, seed=1), _unit(3, 2, 4, seed=2)
    tq, tp, tn = _unit(3, 5, seed=3), _unit(3, 5, seed=4), _unit(3, 2, 5, seed=5)
    out = InBatchScoreDistillLoss(0.2, 0.1, lambda_kl=2.0, lambda_nce=0.5)(q, p, n, tq, tp, tn)
    kl = _kl_by_hand(q, p, n, tq, tp, tn, 0.2, 0.1)
    nce = InfoNCELoss(0.2)(q, p, n).item()
    assert out.loss.item() == pytest.approx(2.0 * kl + 0.5 * nce, rel=1e-5)
    assert out.components["kl"].item() == pytest.approx(kl, rel=1e-5)
    assert out.components["infonce"].item() == pytest.approx(nce, rel=1e-6)


def test_in_batch_score_distill_zero_weight_term_is_not_computed(monkeypatch):
    q, p, n = _unit(2, 4, seed=0), _unit(2, 4, seed=1), _unit(2, 1, 4, seed=2)

    def boom(*args, **kwargs):
        raise AssertionError("a zero-weight term was computed")

    only_nce = InBatchScoreDistillLoss(0.1, lambda_kl=0.0)
    monkeypatch.setattr(only_nce.combined.terms["kl"], "forward", boom)
    out = only_nce(q, p, n, q, p, n)
    assert set(out.components) == {"infonce"}
    only_kl = InBatchScoreDistillLoss(0.1, lambda_nce=0.0)
    monkeypatch.setattr(only_kl.combined.terms["infonce"], "forward", boom)
    assert set(only_kl(q, p, n, q, p, n).components) == {"kl"}


def _config(stage: str, **loss) -> TrainConfig:
    return TrainConfig.from_dict({"stage": stage, "output_dir": "runs/x", "data": {"train_file": "t.jsonl"},
                                  "model": {"query_model": "q", "document_model": "d"}, "loss": loss})


def test_stage_routing_and_loss_inputs():
    b, k, d = 3, 2, 4
    emb = {"query": _unit(b, d, seed=0), "positive": _unit(b, d, seed=1), "negative": _unit(b * k, d, seed=2),
           "teacher_query": _unit(b, d, seed=3), "teacher_positive": _unit(b, d, seed=4),
           "teacher_negative": _unit(b * k, d, seed=5)}
    neg, tneg = emb["negative"].reshape(b, k, d), emb["teacher_negative"].reshape(b, k, d)

    kale = build_stage(_config("kale_align", temperature=0.05, teacher_temperature=0.02))
    assert kale.field_towers == {"query": "query", "positive": TEACHER, "negative": TEACHER, "teacher_query": TEACHER}
    expected = _kl_by_hand(emb["query"], emb["positive"], neg, emb["teacher_query"], emb["positive"], neg, 0.05, 0.02)
    assert float(kale.compute_loss(emb, k)) == pytest.approx(expected, rel=1e-5)

    distill = build_stage(_config("embed_distill"))
    assert distill.field_towers == {"query": "query", "teacher_query": TEACHER}
    assert float(distill.compute_loss(emb, k)) == pytest.approx(
        float(EmbeddingMSELoss()(emb["query"], emb["teacher_query"])))
    from care.train.engine.data import TrainingBatch
    from care.train.engine.stage import teacher_query_key

    batch = TrainingBatch(["a"], ["b"], [], 0, [None], [None])
    assert distill.batch_texts(batch, "Q: ") == {"query": ["Q: a"], "teacher_query": [teacher_query_key("a", None, None)]}

    score = build_stage(_config("score_distill", temperature=0.1, lambda_distill=0.5, lambda_contrastive=2.0))
    assert score.teacher_scores_only and not kale.teacher_scores_only
    out = score.compute_loss(emb, k)
    kl = _kl_by_hand(emb["query"], emb["positive"], neg, emb["teacher_query"], emb["teacher_positive"], tneg, 0.1, 0.1)
    nce = float(InfoNCELoss(0.1)(emb["query"], emb["positive"], neg))
    assert float(out.loss) == pytest.approx(0.5 * kl + 2.0 * nce, rel=1e-5)


def test_teacher_texts_include_query_keys_only_when_needed():
    from care.data.training import TrainingExample
    from care.train.engine.stage import teacher_query_key

    rows = [TrainingExample(query="头痛", pos=("布洛芬",), neg=("补液",)),
            TrainingExample(query="发烧", pos=("退烧",), prompt="检索")]
    keys = [teacher_query_key("头痛", None, None), teacher_query_key("发烧", "检索", None)]
    assert build_stage(_config("embed_distill")).teacher_texts(rows, "Q: ") == sorted(keys)
    assert build_stage(_config("kale_align")).teacher_texts(rows, None) == sorted([*keys, "布洛芬", "补液", "退烧"])
    assert build_stage(_config("stage1")).teacher_texts(rows, "Q: ") == sorted(["布洛芬", "补液", "退烧"])


class _RoleTeacher:
    """A fake asymmetric teacher (e5-like): records how each text was embedded."""

    name, fingerprint, dim = "roles", "roles-v1", 2

    def __init__(self):
        self.calls = []

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        self.calls.append(("query", instruction, list(texts)))
        return torch.ones(len(texts), 2).numpy()

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        self.calls.append(("document", None, list(texts)))
        return torch.zeros(len(texts), 2).numpy()


def test_query_aware_teacher_embeds_queries_as_queries():
    from care.train.engine.stage import QueryAwareTeacher, teacher_query_key

    teacher = _RoleTeacher()
    wrapped = build_stage(_config("kale_align")).teacher_encoder(teacher, "Q: ")
    assert isinstance(wrapped, QueryAwareTeacher) and wrapped.fingerprint != teacher.fingerprint
    texts = ["布洛芬", teacher_query_key("头痛", None, None), teacher_query_key("发烧", "检索", None)]
    vecs = wrapped.encode_documents(texts)
    assert vecs.tolist() == [[0, 0], [1, 1], [1, 1]]  # document row, then the two query rows
    assert ("document", None, ["布洛芬"]) in teacher.calls
    # an asymmetric teacher gets the raw query and the row's instruction, never the student's prefix
    queries = {c[1]: c[2] for c in teacher.calls if c[0] == "query"}
    assert queries == {None: ["头痛"], "检索": ["发烧"]}
    # stages without teacher query fields keep the teacher (and its cache fingerprint) as is
    assert build_stage(_config("stage1")).teacher_encoder(teacher, "Q: ") is teacher


def test_query_aware_teacher_gives_a_symmetric_tower_the_students_text():
    from care.train.engine.stage import QueryAwareTeacher, teacher_query_key
    from care.train.engine.teacher import TowerEncoder

    class Tower:
        def encode(self, texts, **kwargs):
            self.seen = list(texts)
            return torch.zeros(len(texts), 2).numpy()

    tower = Tower()
    wrapped = QueryAwareTeacher(TowerEncoder(tower, "doc", "fp"), "Q: ")
    wrapped.encode_documents([teacher_query_key("头痛", None, None), teacher_query_key("发烧", "检索", None),
                              teacher_query_key("文档", None, "doc_align")])
    assert tower.seen == ["Q: 头痛", "Instruct: 检索\nQuery: 发烧", "文档"]


def test_stage1_query_side_as_queries_embeds_query_rows_with_the_teachers_query_convention():
    """``model.teacher.query_side_as_queries``: (q, q, q⁻) rows' teacher side becomes query keys; (d, d, d⁻) rows stay documents."""
    from care.data.training import DOC_ALIGN, QUERY_ALIGN, TrainingExample
    from care.train.engine.data import TrainingBatch
    from care.train.engine.stage import QueryAwareTeacher, teacher_query_key

    config = TrainConfig.from_dict({"stage": "stage1", "output_dir": "runs/x", "data": {"train_file": "t.jsonl"},
                                    "model": {"query_model": "q", "document_model": "d",
                                              "teacher": {"query_side_as_queries": True}}})
    stage = build_stage(config)
    assert stage.query_side_as_queries and stage.teacher_embeds_queries
    rows = [TrainingExample(query="头痛", pos=("头痛",), neg=("发烧",), type=QUERY_ALIGN),
            TrainingExample(query="布洛芬止痛", pos=("布洛芬止痛",), neg=("补液",), type=DOC_ALIGN)]
    key = lambda t: teacher_query_key(t, None, QUERY_ALIGN)  # noqa: E731
    assert stage.teacher_texts(rows, "query: ") == sorted([key("头痛"), key("发烧"), "布洛芬止痛", "补液"])
    batch = TrainingBatch(["头痛", "布洛芬止痛"], ["头痛", "布洛芬止痛"], ["发烧", "补液"], 0, [None, None],
                          [QUERY_ALIGN, DOC_ALIGN])
    texts = stage.batch_texts(batch, "query: ")
    assert texts["query"] == ["query: 头痛", "布洛芬止痛"]
    assert texts["positive"] == [key("头痛"), "布洛芬止痛"] and texts["negative"] == [key("发烧"), "补液"]
    teacher = _RoleTeacher()
    assert isinstance(stage.teacher_encoder(teacher, "query: "), QueryAwareTeacher)
    # off by default, and only Stage I reads it
    assert not build_stage(_config("stage1")).query_side_as_queries
    assert not build_stage(TrainConfig.from_dict({**config.to_dict(), "stage": "stage1_sft"})).query_side_as_queries


def test_score_distill_needs_a_nonzero_weight():
    from care.train.engine.config import ConfigError

    with pytest.raises(ConfigError, match="lambda_distill"):
        _config("score_distill", lambda_distill=0, lambda_contrastive=0)
    _config("kale_align", lambda_contrastive=0, lambda_mse=0)  # unused by kale_align: allowed
