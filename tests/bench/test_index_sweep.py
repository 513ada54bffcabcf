"""``care.bench.index_sweep``: exact top-k in blocks, search settings set in place, recall, and a sweep's rows."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from care.bench.index_sweep import apply_search_setting, exact_top_k, recall_at_k, setting_label, sweep_search_settings
from care.index import IndexConfig, build_index

DIM = 16


def _unit(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_exact_top_k_in_blocks_equals_one_exact_search():
    docs, queries = _unit(250, 0), _unit(7, 1)
    scores, ids = exact_top_k(docs, queries, 10, block_rows=64)  # blocks of 64, 64, 64, 58
    expected = np.argsort(-(queries @ docs.T), axis=1)[:, :10]
    assert ids.dtype == np.int64 and np.array_equal(ids, expected)
    assert np.allclose(scores, np.take_along_axis(queries @ docs.T, expected, axis=1), atol=1e-5)


def test_settings_are_labelled_and_set_in_place():
    assert setting_label({"nprobe": 16, "k_factor": 4}) == "nprobe=16 k_factor=4" and setting_label({}) == "exact"
    hnsw = build_index(IndexConfig(type="hnsw", hnsw_m=8), DIM)
    hnsw.add(_unit(50, 2))
    apply_search_setting(hnsw.native, {"ef_search": 33})
    assert hnsw.native.hnsw.efSearch == 33
    ivfpq = build_index(IndexConfig(type="ivfpq", nlist=4, pq_m=8, pq_nbits=4, train_size=300, refine="flat"), DIM)
    ivfpq.add(_unit(300, 3))
    apply_search_setting(ivfpq.native, {"nprobe": 3, "k_factor": 7})
    assert faiss.extract_index_ivf(ivfpq.native).nprobe == 3 and ivfpq.native.k_factor == 7.0
    with pytest.raises(ValueError, match="unknown search setting nlist"):
        apply_search_setting(ivfpq.native, {"nlist": 8})


def test_recall_counts_the_true_top_k_among_the_hits():
    truth = np.array([[1, 2, 3], [4, 5, 6]])
    assert recall_at_k(np.array([[3, 2, 9], [4, 5, 6]]), truth, 3) == pytest.approx((2 / 3 + 1) / 2)
    assert recall_at_k(np.array([[1], [7]]), truth, 1) == 0.5


def test_a_sweep_gives_one_row_per_setting_with_recall_and_latency():
    docs, queries = _unit(400, 4), _unit(20, 5)
    index = build_index(IndexConfig(type="ivf", nlist=8, train_size=400), DIM)
    index.add(docs)
    index.search(queries[:1], 1)  # trains the IVF part
    _, truth = exact_top_k(docs, queries, 5)
    rows = sweep_search_settings(index, queries, truth, [{"nprobe": 1}, {"nprobe": 8}], k=5, latency_queries=10,
                                 max_seconds=20.0)
    assert [row["setting"] for row in rows] == ["nprobe=1", "nprobe=8"]
    assert rows[1]["recall@5"] == 1.0 and rows[0]["recall@5"] <= 1.0  # every list visited: exact
    assert all(row["p10_ms"] <= row["p50_ms"] <= row["p90_ms"] and row["calls"] >= 10 for row in rows)
    assert {"stable", "self_check", "self_check_passed", "load_average_1min", "measured"} <= set(rows[0])
