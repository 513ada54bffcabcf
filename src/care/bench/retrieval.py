"""Retrieval task runner: encode the corpus (cached), stream it into a FAISS index, search queries
in batches, score the run with pytrec_eval. Queries no model can take are refused before any
encoding (:mod:`care.bench.query_check`)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from care.bench.encoding import DOCUMENT, QUERY, check_same_dim, encode_collection
from care.bench.metrics import ranking_metrics
from care.bench.options import RunOptions
from care.bench.query_check import check_queries, report_long_queries
from care.bench.task import TaskMetadata
from care.bench.timing import PhaseTimer
from care.data.retrieval import RetrievalData, load_retrieval_folder
from care.encoders.base import Encoder, LexicalRetriever
from care.encoders.cache import EmbeddingCache
from care.index.faiss_index import build_index

logger = logging.getLogger(__name__)


def load_data(task: TaskMetadata) -> RetrievalData:
    return load_retrieval_folder(task.path, split=task.split)


def dense_run(
    model: Encoder, task: TaskMetadata, data: RetrievalData, options: RunOptions, cache: EmbeddingCache, timer: PhaseTimer,
) -> dict[str, dict[str, float]]:
    """Return ``{query_id: {doc_id: score}}`` with the top ``options.top_k`` documents per query."""
    doc_ids = list(data.corpus)
    query_ids = list(data.queries)
    with timer.phase("encode_documents_s"):
        doc_emb = encode_collection(
            model, cache, role=DOCUMENT, ids=doc_ids, texts=[data.corpus[d].full_text for d in doc_ids],
            instruction=None, batch_size=options.batch_size, show_progress=options.show_progress,
            desc=f"{model.name} {task.name} documents",
        )
    with timer.phase("encode_queries_s"):
        q_emb = encode_collection(
            model, cache, role=QUERY, ids=query_ids, texts=[data.queries[q] for q in query_ids],
            instruction=task.instruction, batch_size=options.batch_size, show_progress=options.show_progress,
            desc=f"{model.name} {task.name} queries",
        )
    dim = check_same_dim(model.name, q_emb, doc_emb)
    with timer.phase("index_s"):
        index = build_index(options.index, dim)
        for start in range(0, len(doc_ids), options.add_batch_rows):
            index.add(np.asarray(doc_emb[start : start + options.add_batch_rows], dtype=np.float32))
    run: dict[str, dict[str, float]] = {}
    with timer.phase("search_s"):
        for start in range(0, len(query_ids), options.search_batch_rows):
            batch = np.asarray(q_emb[start : start + options.search_batch_rows], dtype=np.float32)
            scores, ids = index.search(batch, options.top_k)
            for row, qid in enumerate(query_ids[start : start + len(batch)]):
                run[qid] = {doc_ids[i]: float(s) for s, i in zip(scores[row], ids[row]) if i >= 0}
    return run


def lexical_run(
    model: LexicalRetriever, data: RetrievalData, options: RunOptions, timer: PhaseTimer,
) -> dict[str, dict[str, float]]:
    """Index the corpus (timed as document encoding) and search every query (timed as search)."""
    doc_ids = list(data.corpus)
    with timer.phase("encode_documents_s"):
        model.index(doc_ids, [data.corpus[d].full_text for d in doc_ids])
    query_ids = list(data.queries)
    run: dict[str, dict[str, float]] = {}
    with timer.phase("search_s"):
        hits = model.search([data.queries[q] for q in query_ids], options.top_k)
        for qid, row in zip(query_ids, hits):
            run[qid] = {d: float(s) for d, s in row}
    return run


def run_retrieval(
    model: Encoder | LexicalRetriever, task: TaskMetadata, options: RunOptions, cache: EmbeddingCache | None, timer: PhaseTimer,
) -> tuple[dict[str, float], dict[str, int], dict[str, Any], dict[str, str]]:
    """Evaluate a retrieval task; returns ``(scores, stats, settings, refused queries {id: reason})``.

    Refused queries (:mod:`care.bench.query_check`) are neither searched nor scored: their qrels are
    left out of the metric; ``stats["n_queries"]`` counts the scored ones.
    """
    with timer.phase("load_s"):
        data = load_data(task)
    refused = check_queries(data.queries, task.name)
    if refused:
        data = RetrievalData(corpus=data.corpus, queries={q: t for q, t in data.queries.items() if q not in refused},
                             qrels={q: row for q, row in data.qrels.items() if q not in refused})
    stats = {"n_queries": len(data.queries), "n_documents": len(data.corpus), "n_qrels": sum(len(r) for r in data.qrels.values()),
             "n_refused_queries": len(refused)}
    if isinstance(model, Encoder):
        long = report_long_queries(model, list(data.queries.values()), task.instruction, task.name)
        if long is not None:
            stats["n_long_queries"] = long
        run = dense_run(model, task, data, options, cache, timer)
        settings = {"index": options.index.to_dict(), "top_k": options.top_k}
    else:
        run = lexical_run(model, data, options, timer)
        settings = {"index": "lexical", "top_k": options.top_k}
    with timer.phase("metrics_s"):
        scores = ranking_metrics(run, data.qrels, task.scores, relevance_threshold=task.relevance_threshold)
    return scores, stats, settings, refused
