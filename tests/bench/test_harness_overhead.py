"""``care.bench.harness_overhead``: the harness's own time against an encoder of known cost."""

from __future__ import annotations

from care.bench.harness_overhead import OVERHEAD_DIM, TARGET_OUTSIDE_ENCODING, run_overhead, synthetic_task
from care.data.retrieval import load_retrieval_folder
from care.testing.emulated_encoder import EmulatedEncoder


def test_the_synthetic_task_has_one_relevant_document_per_query(tmp_path):
    folder = synthetic_task(tmp_path / "task", n_docs=30, n_queries=5)
    data = load_retrieval_folder(folder)
    assert len(data.corpus) == 30 and len(data.queries) == 5
    assert all(len(rel) == 1 and next(iter(rel)) in data.corpus for rel in data.qrels.values())


def test_a_cold_run_then_a_cached_rerun_that_encodes_nothing():
    n_docs, n_queries, rate = 200, 20, 50_000.0
    out = run_overhead(n_docs, n_queries, rate, EmulatedEncoder(rate, dim=OVERHEAD_DIM))
    assert out["n_documents"] == n_docs and out["known_encode_cost_s"] == round((n_docs + n_queries) / rate, 2)
    assert out["cached_rerun"]["texts_encoded"] == 0  # every vector came from the cache
    cold = out["cold"]
    assert 0.0 <= cold["outside_encoding_share"] <= 1.0 and cold["ndcg_at_10"] > 0
    assert out["meets_target"] == (cold["outside_encoding_share"] < TARGET_OUTSIDE_ENCODING)
