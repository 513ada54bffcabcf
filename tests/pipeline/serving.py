"""Asking a running ``care serve`` the questions of a retrieval task (shared by the pipeline's serving tests)."""

from __future__ import annotations

from pathlib import Path

import httpx

from care.data.retrieval import load_qrels, load_queries, split_files
from care.serve.app import create_app
from care.serve.engine import load_engine
from care.serve.server import serve_in_thread

TOP_K = 5


def relevant_documents(task_folder: Path, threshold: int) -> tuple[dict[str, str], dict[str, set[str]]]:
    """The task's questions and, per question, the documents judged relevant at ``threshold`` or above."""
    queries_file, qrels_file = split_files(task_folder, None)  # ours (qrels.tsv) or BEIR's (qrels/test.tsv)
    queries = load_queries(queries_file)
    qrels = load_qrels(qrels_file, query_ids=queries)
    relevant = {q: {d for d, score in docs.items() if score >= threshold} for q, docs in qrels.items()}
    return {q: t for q, t in queries.items() if relevant.get(q)}, relevant


def served_hit_rate(index: Path, queries: dict[str, str], relevant: dict[str, set[str]], k: int = TOP_K) -> float:
    """Share of ``queries`` whose top ``k`` over HTTP (``POST /search`` on a real uvicorn server) holds a relevant document."""
    engine = load_engine(index)
    hits = 0
    with serve_in_thread(create_app(engine)) as url, httpx.Client(base_url=url, timeout=60) as client:
        for query_id, text in queries.items():
            response = client.post("/search", json={"query": text, "k": k})
            response.raise_for_status()
            hits += any(hit["id"] in relevant[query_id] for hit in response.json()["hits"])
    return hits / len(queries)
