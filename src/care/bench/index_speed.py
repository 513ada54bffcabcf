"""``benchmarks/bench_speed.py``'s ``index`` section: batch-1 search latency and recall@10 against exact search for flat /
HNSW / IVF / IVF-PQ over random or clustered unit vectors, one row per search setting.

The indexes are the product's (:func:`care.index.faiss_index.build_index`), their search settings and recall
:mod:`care.bench.index_sweep`'s; latencies go through :func:`care.bench.latency.measure_calls`. Search at 1M
real e5 vectors is ``benchmarks/search_1m.py``'s.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from care.bench.index_sweep import apply_search_setting, recall_at_k
from care.bench.latency import LatencySettings, measure_calls

logger = logging.getLogger(__name__)

#: Neighbours searched and compared with exact search.
TOP_K = 10
#: Clustered data: centres, spread around them; queries: noise added to a database vector.
CLUSTERS = 1000
CLUSTER_SPREAD = 0.05
QUERY_NOISE = 0.5
#: Vectors added to an index at a time.
ADD_CHUNK = 100_000
#: Batch-1 search latency per index setting: passes over 50 queries until the median is stable.
INDEX_LATENCY_QUERIES = 50
INDEX_LATENCY = LatencySettings(min_calls=100, max_calls=500, max_seconds=120.0)


def make_vectors(kind: str, n: int, dim: int, n_queries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``random``: uniform unit vectors; ``clustered``: unit vectors around 1000 centres (closer to real embeddings).

    Queries are database vectors plus small noise, so each has a near neighbour, as real queries do.
    """
    if kind == "random":
        data = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = rng.standard_normal((CLUSTERS, dim), dtype=np.float32)
        data = centres[rng.integers(0, CLUSTERS, n)] + CLUSTER_SPREAD * rng.standard_normal((n, dim), dtype=np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    queries = data[rng.choice(n, n_queries, replace=False)] + QUERY_NOISE * rng.standard_normal((n_queries, dim), dtype=np.float32) / np.sqrt(dim)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return data, queries


def bench_index(sizes: list[int], dim: int, repeats: int, n_queries: int, hnsw_max: int, kinds: list[str]) -> dict[str, Any]:
    """Latency (batch 1, p50 over 50 queries, each a median of ``repeats``) and recall@10 vs exact, per search setting."""
    import faiss

    from care.index.config import IndexConfig
    from care.index.faiss_index import build_index

    rng = np.random.default_rng(0)
    configs = {
        "flat": (IndexConfig(type="flat"), [None]),
        "hnsw": (IndexConfig(type="hnsw", hnsw_m=32, ef_construction=80), [64, 256]),
        "ivf": (IndexConfig(type="ivf", nlist=1024, train_size=50_000), [16, 64, 256]),
        "ivfpq": (IndexConfig(type="ivfpq", nlist=1024, pq_m=96, train_size=50_000), [64]),
    }
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        for n in sizes:
            data, queries = make_vectors(kind, n, dim, n_queries, rng)
            exact = None
            for name, (config, settings) in configs.items():
                if name == "hnsw" and n > hnsw_max:
                    rows.append({"data": kind, "type": name, "n": n, "skipped": f"HNSW build above {hnsw_max:,} vectors is beyond this run's time budget on 2 shared cores"})
                    continue
                started = time.perf_counter()
                index = build_index(config, dim)
                for start in range(0, n, ADD_CHUNK):
                    index.add(data[start : start + ADD_CHUNK])
                index.search(queries[:1], TOP_K)  # flushes IVF training buffers
                build_s = time.perf_counter() - started
                param = {"hnsw": "ef_search", "flat": None}.get(name, "nprobe")
                for setting in settings:
                    apply_search_setting(index.native, {param: setting} if param else {})  # swept in place
                    _, ids = index.search(queries, TOP_K)
                    if exact is None:
                        exact = ids
                    recall = recall_at_k(ids, exact, TOP_K)
                    timed = measure_calls({"search": lambda i, index=index: index.search(queries[i : i + 1], TOP_K)}, INDEX_LATENCY_QUERIES,
                                          settings=INDEX_LATENCY).models["search"]
                    row = {"data": kind, "type": name, "n": n, "dim": dim, "param": param,
                           "value": setting, "build_s": round(build_s, 1), "p50_ms": round(timed.p50_ms, 3),
                           "p90_ms": round(timed.p90_ms, 3), "recall@10": round(recall, 4)}
                    rows.append(row)
                    logger.info("index: %s", row)
                del index
            del data
    return {"rows": rows, "threads": faiss.omp_get_max_threads(), "note": (
        "queries are database vectors plus small noise (each has a near neighbour, as real queries do); 'random' = uniform "
        "unit vectors (no neighbourhood structure beyond that one neighbour: the worst case for approximate search), "
        f"'clustered' = unit vectors around {CLUSTERS} centres (closer to real embeddings). {faiss_build()}, one thread. "
        "Search at 1M with real e5 vectors: benchmarks/results/search_1m/.")}


def faiss_build() -> str:
    """How the installed faiss runs: its compile options and the SIMD level it dispatches to on this CPU."""
    import faiss

    level = faiss.SIMDConfig.get_level_name() if hasattr(faiss, "SIMDConfig") else "unknown"
    return (f"faiss {faiss.__version__} compiled with {faiss.get_compile_options().strip()!r} (DD = dynamic dispatch: "
            f"SIMD kernels chosen at run time), running {level} kernels on this CPU")
