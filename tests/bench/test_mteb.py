"""mteb interop: our folders as mteb tasks, our encoders as mteb models, C-MTEB medical tasks
read from a local export — all offline."""

import random

import pytest

mteb = pytest.importorskip("mteb")

from care.bench.mteb_bridge import MTEBEncoderAdapter  # noqa: E402
from care.bench.mteb_cmteb import MTEB_SOURCES, write_split  # noqa: E402
from care.bench.mteb_tasks import to_mteb_task  # noqa: E402
from care.bench.options import RunOptions  # noqa: E402
from care.bench.registry import get_task  # noqa: E402
from care.bench.runner import evaluate  # noqa: E402
from care.data.rerank import load_rerank  # noqa: E402
from care.data.retrieval import Document, load_retrieval_folder, write_retrieval_folder  # noqa: E402
from care.errors import CareError  # noqa: E402

from .fakes import HashEncoder  # noqa: E402

VOCAB = "心肝脾肺肾胃肠血压糖尿病头痛发烧咳嗽感冒药治疗检查医生"


def _synthetic_retrieval(folder, n_docs=40, n_queries=12, seed=7):
    rng = random.Random(seed)
    docs = ["".join(rng.choice(VOCAB) for _ in range(12)) for _ in range(n_docs)]
    corpus = [Document(f"d{i}", t) for i, t in enumerate(docs)]
    queries, qrels = {}, {}
    for q in range(n_queries):
        target = rng.randrange(n_docs)
        text = docs[target]
        queries[f"q{q}"] = "".join(rng.sample(text, 5)) + rng.choice(VOCAB)
        other = (target + 1) % n_docs
        qrels[f"q{q}"] = {f"d{target}": 2, f"d{other}": 1}
    write_retrieval_folder(folder, corpus, queries, qrels)
    return folder


def test_mteb_retrieval_ndcg_equals_ours(tmp_path):
    meta = get_task(_synthetic_retrieval(tmp_path / "synthetic"))
    ours = evaluate(HashEncoder(dim=16), meta, RunOptions(show_progress=False))
    assert 0.05 < ours.scores["ndcg_at_10"] < 0.99, "the case must not be trivial"
    result = mteb.evaluate(MTEBEncoderAdapter(HashEncoder(dim=16)), to_mteb_task(meta), cache=None, show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]
    assert theirs["ndcg_at_10"] == pytest.approx(ours.scores["ndcg_at_10"], abs=1e-5)
    assert theirs["recall_at_10"] == pytest.approx(ours.scores["recall_at_10"], abs=1e-5)


def test_adapter_routes_roles_and_instruction(tmp_path, sts_folder):
    enc = HashEncoder()
    adapter = MTEBEncoderAdapter(enc, instructions={"x": "Custom."})

    class Meta:
        name, prompt = "t", {"query": "Find."}

    from mteb.types import PromptType

    q = adapter.encode([{"text": ["头痛", "发烧"]}], task_metadata=Meta, hf_split="test", hf_subset="default", prompt_type=PromptType.query)
    d = adapter.encode([{"text": ["头痛"]}], task_metadata=Meta, hf_split="test", hf_subset="default", prompt_type=PromptType.document)
    assert q.shape == (2, enc.dim) and d.shape == (1, enc.dim)
    assert enc.calls == {"query": 2, "document": 1} and enc.seen_instructions == ["Find."]
    Meta.name = "x"
    adapter.encode([{"text": ["头痛"]}], task_metadata=Meta, hf_split="test", hf_subset="default", prompt_type=PromptType.query)
    assert enc.seen_instructions[-1] == "Custom."
    assert adapter.mteb_model_meta.embed_dim == enc.dim


def test_mteb_sts_and_rerank_tasks_build(sts_folder, rerank_folder):
    sts = to_mteb_task(get_task(sts_folder))
    sts.load_data()
    assert sts.dataset["test"].num_rows == 4 and sts.metadata.main_score == "pearson"
    rr = to_mteb_task(get_task(rerank_folder))
    rr.load_data()
    split = rr.dataset["default"]["test"]
    assert split["top_ranked"] == {"q0": ["q0-p0", "q0-n0", "q0-n1"], "q1": ["q1-p0", "q1-n0"]}
    assert split["relevant_docs"]["q0"] == {"q0-p0": 1, "q0-n0": 0, "q0-n1": 0}
    assert rr.metadata.type == "Reranking" and rr.metadata.main_score == "map_at_10"


def _fake_split(corpus, queries, qrels, top_ranked=None):
    from datasets import Dataset

    return {
        "corpus": Dataset.from_list([{"id": k, "text": v, "title": ""} for k, v in corpus.items()]),
        "queries": Dataset.from_list([{"id": k, "text": v} for k, v in queries.items()]),
        "relevant_docs": qrels,
        "top_ranked": top_ranked,
    }


def test_cmteb_rerank_export_and_run(tmp_path):
    """A fabricated local copy of CMedQAv1-reranking in mteb's layout, exported and run by name."""
    split = _fake_split(
        {"a": "高血压按时服药", "b": "感冒多喝水", "c": "胃炎引起胃痛", "d": "糖尿病控制饮食"},
        {"q1": "高血压吃什么药", "q2": "糖尿病饮食"},
        {"q1": {"a": 1, "b": 0}, "q2": {"d": 1}},
        {"q1": ["a", "b", "c"], "q2": ["c", "d"]},
    )
    root = tmp_path / "root"
    write_split(split, root / "CMedQAv1-reranking", MTEB_SOURCES["CMedQAv1-reranking"].type)
    rows = load_rerank(root / "CMedQAv1-reranking" / "rerank.jsonl")
    assert [(r.query, r.positive, r.negative) for r in rows] == [
        ("高血压吃什么药", ("高血压按时服药",), ("感冒多喝水", "胃炎引起胃痛")),
        ("糖尿病饮食", ("糖尿病控制饮食",), ("胃炎引起胃痛",)),
    ]
    meta = get_task("CMedQAv1-reranking", data_root=root)
    res = evaluate(HashEncoder(), meta, RunOptions(show_progress=False))
    assert res.main_score == "map_at_10" and set(res.scores) == {"map_at_10", "mrr_at_10", "map_at_1000"}


def test_cmteb_retrieval_export(tmp_path):
    split = _fake_split({"a": "高血压按时服药", "b": "感冒多喝水"}, {"q": "高血压"}, {"q": {"a": 1}})
    folder = write_split(split, tmp_path / "CmedqaRetrieval", "retrieval")
    data = load_retrieval_folder(folder)
    assert set(data.corpus) == {"a", "b"} and data.qrels == {"q": {"a": 1}}
    assert get_task("CmedqaRetrieval", data_root=tmp_path).path == folder


def test_cmteb_missing_names_the_dataset_repo(tmp_path):
    with pytest.raises(CareError, match=r"mteb/CmedqaRetrieval.*python -m care.bench.mteb_cmteb CmedqaRetrieval"):
        get_task("CmedqaRetrieval", data_root=tmp_path)
