"""Rerank task runner: each query's candidates (its positives + negatives) ranked by cosine
similarity (or by the lexical model's ``score``), scored with pytrec_eval MAP@10 / MRR@10.
Query ``q{i}`` is the file's ``i``-th example (from 0); queries no model can take are refused
before any encoding (:mod:`care.bench.query_check`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from care.bench.encoding import DOCUMENT, QUERY, check_same_dim, encode_collection
from care.bench.metrics import ranking_metrics
from care.bench.options import RunOptions
from care.bench.query_check import check_queries, report_long_queries
from care.bench.registry import split_files_of
from care.bench.task import TaskMetadata
from care.bench.timing import PhaseTimer
from care.data.rerank import RerankExample, load_rerank
from care.encoders.base import Encoder, LexicalRetriever
from care.encoders.cache import EmbeddingCache


def rerank_file(task: TaskMetadata) -> Path:
    """``{split}_rerank.jsonl`` when the task has a split (refused when that file is missing), else ``rerank.jsonl``."""
    return split_files_of(task)[0]


def candidate_texts(examples: list[RerankExample]) -> list[str]:
    """The distinct candidate texts of a rerank set in first-seen order (the rows of its document
    embedding matrix; the cache ids are their positions as strings)."""
    return list(dict.fromkeys(t for ex in examples for t in (*ex.positive, *ex.negative)))


def _qrels_and_candidates(examples: list[RerankExample]) -> tuple[dict[str, dict[str, int]], list[list[str]]]:
    qrels, cands = {}, []
    for i, ex in enumerate(examples):
        qrels[f"q{i}"] = {**{f"q{i}-p{j}": 1 for j in range(len(ex.positive))}, **{f"q{i}-n{j}": 0 for j in range(len(ex.negative))}}
        cands.append([*ex.positive, *ex.negative])
    return qrels, cands


def _scored_examples(examples: list[RerankExample], task: TaskMetadata) -> tuple[list[RerankExample], dict[str, str]]:
    """The examples whose query is kept (ids ``q{i}`` renumbered over them) and the refused ``{q{i}: reason}``
    (``i`` the example's position in the file)."""
    refused = check_queries({f"q{i}": ex.query for i, ex in enumerate(examples)}, task.name)
    return [ex for i, ex in enumerate(examples) if f"q{i}" not in refused], refused


def run_rerank(
    model: Encoder | LexicalRetriever, task: TaskMetadata, options: RunOptions, cache: EmbeddingCache | None, timer: PhaseTimer,
) -> tuple[dict[str, float], dict[str, int], dict[str, Any], dict[str, str]]:
    """Evaluate a rerank task; returns ``(scores, stats, settings, refused queries {q{i}: reason})``."""
    with timer.phase("load_s"):
        examples, refused = _scored_examples(load_rerank(rerank_file(task)), task)
        qrels, cands = _qrels_and_candidates(examples)
    stats = {"n_queries": len(examples), "n_candidates": sum(len(c) for c in cands), "n_refused_queries": len(refused)}
    run: dict[str, dict[str, float]] = {}
    if isinstance(model, Encoder):
        long = report_long_queries(model, [e.query for e in examples], task.instruction, task.name)
        if long is not None:
            stats["n_long_queries"] = long
        unique_docs = candidate_texts(examples)
        position = {t: i for i, t in enumerate(unique_docs)}
        with timer.phase("encode_documents_s"):
            d_emb = encode_collection(
                model, cache, role=DOCUMENT, ids=[str(i) for i in range(len(unique_docs))], texts=unique_docs,
                instruction=None, batch_size=options.batch_size, show_progress=options.show_progress,
                desc=f"{model.name} {task.name} candidates",
            )
        with timer.phase("encode_queries_s"):
            q_emb = encode_collection(
                model, cache, role=QUERY, ids=[str(i) for i in range(len(examples))], texts=[e.query for e in examples],
                instruction=task.instruction, batch_size=options.batch_size, show_progress=options.show_progress,
                desc=f"{model.name} {task.name} queries",
            )
        check_same_dim(model.name, q_emb, d_emb)
        with timer.phase("search_s"):
            for i, (ex, cand) in enumerate(zip(examples, cands)):
                vecs = np.asarray(d_emb[[position[t] for t in cand]], dtype=np.float32)
                sims = vecs @ np.asarray(q_emb[i], dtype=np.float32)
                run[f"q{i}"] = _named_scores(i, ex, sims)
    else:
        with timer.phase("search_s"):
            for i, (ex, cand) in enumerate(zip(examples, cands)):
                run[f"q{i}"] = _named_scores(i, ex, np.asarray(model.score(ex.query, cand), dtype=np.float64))
    with timer.phase("metrics_s"):
        scores = ranking_metrics(run, qrels, task.scores, relevance_threshold=1)
    return scores, stats, {"scoring": "cosine" if isinstance(model, Encoder) else "lexical score"}, refused


def _named_scores(i: int, ex: RerankExample, sims: np.ndarray) -> dict[str, float]:
    n_pos = len(ex.positive)
    return {(f"q{i}-p{j}" if j < n_pos else f"q{i}-n{j - n_pos}"): float(s) for j, s in enumerate(sims)}
