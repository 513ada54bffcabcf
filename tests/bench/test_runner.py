"""End-to-end runs of the three task types on tiny folders with fake models."""

import json

import numpy as np
import pytest

from care.bench.options import RunOptions
from care.bench.registry import get_task
from care.bench.result import TaskResult
from care.bench.runner import evaluate, evaluate_many
from care.encoders.cache import EmbeddingCache
from care.errors import CareError, DimensionMismatchError
from care.index.config import IndexConfig

from .fakes import HashEncoder, OverlapRetriever, TableEncoder


def _options(tmp_path, **kw):
    return RunOptions(cache=EmbeddingCache(tmp_path / "cache", chunk_size=2), show_progress=False, **kw)


def test_retrieval_scores_timings_and_cache(retrieval_folder, tmp_path):
    task = get_task(retrieval_folder)
    enc = HashEncoder()
    res = evaluate(enc, task, _options(tmp_path))
    assert set(res.scores) == {"ndcg_at_10", "recall_at_10", "recall_at_100", "mrr_at_10"}
    assert res.main_score == "ndcg_at_10" and 0 < res.main_value <= 1
    assert res.scores["recall_at_100"] == pytest.approx(1.0)  # 5 documents, all retrieved
    t = res.timings
    for key in ("encode_queries_s", "encode_documents_s", "search_s", "total_s", "outside_encoding_share"):
        assert key in t
    assert 0 <= t["outside_encoding_share"] <= 1
    assert res.stats == {"n_queries": 3, "n_documents": 5, "n_qrels": 4, "n_refused_queries": 0}
    assert enc.calls == {"query": 3, "document": 5}
    again = evaluate(enc, task, _options(tmp_path))
    assert enc.calls == {"query": 3, "document": 5}, "second run must come from the cache"
    assert again.scores == res.scores


def test_asymmetric_pair_reuses_its_document_towers_cached_embeddings(retrieval_folder, tmp_path):
    from care.encoders.pair import AsymmetricEncoder

    task = get_task(retrieval_folder)
    documents = HashEncoder(name="doc-tower")
    evaluate(documents, task, _options(tmp_path))
    assert documents.calls["document"] == 5
    student = HashEncoder(name="student")
    evaluate(AsymmetricEncoder(student, documents), task, _options(tmp_path))
    assert documents.calls["document"] == 5, "the pair must read the document tower's cached vectors"
    assert student.calls["query"] == 3


def test_retrieval_hand_case_with_graded_qrels(tmp_path):
    from care.data.retrieval import Document, write_retrieval_folder

    folder = tmp_path / "hand"
    write_retrieval_folder(folder, [Document("a", "A"), Document("b", "B"), Document("c", "C")], {"q": "Q"}, {"q": {"a": 2, "b": 1}})
    # cosine(Q, .): c 0.9 > b 0.6 > a 0.3 -> ranking c, b, a
    enc = TableEncoder({"Q": [1, 0], "A": [0.3, 0.9539392], "B": [0.6, 0.8], "C": [0.9, 0.4358899]})
    res = evaluate(enc, get_task(folder), _options(tmp_path))
    # DCG = 1/log2(3) + 2/log2(4); IDCG = 2 + 1/log2(3)
    expected = (1 / np.log2(3) + 1.0) / (2 + 1 / np.log2(3))
    assert res.scores["ndcg_at_10"] == pytest.approx(expected, abs=1e-6)
    assert res.scores["mrr_at_10"] == pytest.approx(0.5)  # first relevant (b) at rank 2


def test_index_types_agree_on_tiny_task(retrieval_folder, tmp_path):
    task = get_task(retrieval_folder)
    flat = evaluate(HashEncoder(), task, _options(tmp_path))
    hnsw = evaluate(HashEncoder(), task, _options(tmp_path, index=IndexConfig(type="hnsw")))
    ivf = evaluate(HashEncoder(), task, _options(tmp_path, index=IndexConfig(type="ivf", nlist=1)))
    assert hnsw.scores == pytest.approx(flat.scores)
    assert ivf.scores == pytest.approx(flat.scores)
    assert ivf.settings["index"]["type"] == "ivf"


def test_rerank_hand_case(rerank_folder, tmp_path):
    texts = ["高血压吃什么药", "高血压患者应该按时服药", "感冒发烧多喝水", "胃痛胃炎", "糖尿病饮食", "糖尿病需要控制饮食", "头痛失眠按摩"]
    vec = {
        "高血压吃什么药": [1, 0], "高血压患者应该按时服药": [0.5, 0.8660254], "感冒发烧多喝水": [0.9, 0.4358899], "胃痛胃炎": [0, 1],
        "糖尿病饮食": [0, 1], "糖尿病需要控制饮食": [0.6, 0.8], "头痛失眠按摩": [0.1, 0.99498744],
    }
    assert set(vec) == set(texts)
    res = evaluate(TableEncoder(vec), get_task(rerank_folder), _options(tmp_path))
    # query 1: negative 0.9 > positive 0.5 > negative 0 -> AP = (1/2)/1, RR = 1/2
    # query 2: negative 0.995 > positive 0.8            -> AP = 1/2,     RR = 1/2
    assert res.scores == pytest.approx({"map_at_10": 0.5, "mrr_at_10": 0.5})
    assert res.stats == {"n_queries": 2, "n_candidates": 5, "n_refused_queries": 0}


def test_sts_uses_query_role_and_instruction(sts_folder, tmp_path):
    (sts_folder / "task.json").write_text(json.dumps({"name": "s", "type": "sts", "instruction": "Retrieve semantically similar text."}), encoding="utf-8")
    enc = HashEncoder()
    res = evaluate(enc, get_task(sts_folder), _options(tmp_path))
    assert enc.calls["document"] == 0 and enc.calls["query"] == 8
    assert enc.seen_instructions == ["Retrieve semantically similar text."] * len(enc.seen_instructions)
    assert set(res.scores) == {"pearson", "spearman"} and -1 <= res.main_value <= 1

    (sts_folder / "task.json").write_text(json.dumps({"name": "s", "type": "sts", "sts_role": "document"}), encoding="utf-8")
    enc2 = HashEncoder()
    evaluate(enc2, get_task(sts_folder), _options(tmp_path))
    assert enc2.calls == {"query": 0, "document": 8}


def test_sts_hand_case(sts_folder, tmp_path):
    import math
    # cosine of each pair: 1.0, 0.6, 0.8, 0.0 against gold 5, 3, 1, 0
    c = math.sqrt(1 - 0.36)
    vec = {"高血压吃什么药": [1, 0], "高血压服用什么药": [1, 0], "糖尿病饮食": [1, 0], "糖尿病吃什么": [0.6, c],
           "发烧怎么办": [1, 0], "胃痛怎么办": [0.8, 0.6], "头痛失眠": [1, 0], "感冒发烧": [0, 1]}
    from scipy.stats import pearsonr, spearmanr
    res = evaluate(TableEncoder(vec), get_task(sts_folder), _options(tmp_path))
    assert res.scores["pearson"] == pytest.approx(pearsonr([1.0, 0.6, 0.8, 0.0], [5, 3, 1, 0])[0], abs=1e-6)
    assert res.scores["spearman"] == pytest.approx(spearmanr([1.0, 0.6, 0.8, 0.0], [5, 3, 1, 0])[0], abs=1e-6)


def test_lexical_model_on_all_types(retrieval_folder, rerank_folder, sts_folder, tmp_path):
    for folder in (retrieval_folder, rerank_folder, sts_folder):
        res = evaluate(OverlapRetriever(), get_task(folder), _options(tmp_path))
        assert res.model == "overlap" and np.isfinite(res.main_value)
    assert evaluate(OverlapRetriever(), get_task(retrieval_folder), _options(tmp_path)).scores["ndcg_at_10"] == pytest.approx(1.0)


def test_dimension_mismatch_names_both_dims(retrieval_folder, tmp_path):
    with pytest.raises(DimensionMismatchError, match="dimension 32.*dimension 64"):
        evaluate(HashEncoder(dim=64, query_dim=32), get_task(retrieval_folder), _options(tmp_path))


def test_non_finite_embeddings_rejected(retrieval_folder, tmp_path):
    class NaNEncoder(HashEncoder):
        def encode_documents(self, texts, **kw):
            out = super().encode_documents(texts, **kw)
            out[0, 0] = np.nan
            return out

    with pytest.raises(CareError, match="NaN or inf"):
        evaluate(NaNEncoder(), get_task(retrieval_folder), _options(tmp_path))


def test_wrong_row_count_rejected(retrieval_folder, tmp_path):
    class ShortEncoder(HashEncoder):
        def encode_documents(self, texts, **kw):
            return super().encode_documents(texts, **kw)[:-1]

    with pytest.raises(CareError, match="expected an array of shape"):
        evaluate(ShortEncoder(), get_task(retrieval_folder), _options(tmp_path))


def test_evaluate_many_writes_results(retrieval_folder, sts_folder, tmp_path):
    out = tmp_path / "out"
    results = evaluate_many([HashEncoder(), OverlapRetriever()], [get_task(retrieval_folder), get_task(sts_folder)], _options(tmp_path), output_dir=out)
    assert len(results) == 4
    files = sorted(p.name for p in out.glob("*.json"))
    assert files == ["hash__tiny-retrieval.json", "hash__tiny-sts.json", "overlap__tiny-retrieval.json", "overlap__tiny-sts.json"]
    loaded = TaskResult.load(out / "hash__tiny-sts.json")
    assert loaded.scores == results[1].scores and loaded.main_score == "pearson"
    table = (out / "results.md").read_text(encoding="utf-8")
    assert "| tiny-retrieval | retrieval | ndcg_at_10 |" in table and "| task | type | metric | hash | overlap |" in table


def test_no_cache_run_uses_temporary_cache(retrieval_folder):
    enc = HashEncoder()
    evaluate(enc, get_task(retrieval_folder), RunOptions(show_progress=False))
    evaluate(enc, get_task(retrieval_folder), RunOptions(show_progress=False))
    assert enc.calls == {"query": 6, "document": 10}


def test_interrupted_run_resumes_without_re_encoding(retrieval_folder, tmp_path):
    class Crashing(HashEncoder):
        def encode_documents(self, texts, **kw):
            if self.calls["document"] >= 2:
                raise KeyboardInterrupt("killed mid-corpus")
            return super().encode_documents(texts, **kw)

    options = RunOptions(cache=EmbeddingCache(tmp_path / "cache", chunk_size=2, grow_chunks=False), show_progress=False)
    with pytest.raises(KeyboardInterrupt):
        evaluate(Crashing(), get_task(retrieval_folder), options)
    enc = HashEncoder()  # same fingerprint: picks up the finished chunk
    evaluate(enc, get_task(retrieval_folder), options)
    assert enc.calls["document"] == 3, "the first 2 of 5 documents were already encoded"


@pytest.mark.parametrize("settings", [{"top_k": 0}, {"top_k": -5}, {"batch_size": 0}])
def test_run_options_that_score_nothing_are_refused(settings):
    """`care bench --top-k 0` scored every model 0.0000 without a word; --batch-size 0 failed inside the encoder."""
    with pytest.raises(CareError, match="must be a whole number of at least 1"):
        RunOptions(show_progress=False, **settings)
