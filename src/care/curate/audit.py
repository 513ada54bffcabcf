"""``audit``: the paper's Appendix E — re-judge the top-k retrieved documents of an existing benchmark
and report the likely false negatives: documents outside a query's qrels positives that every judge
grades as relevant (unanimous rule)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from care.curate.candidate_pool import load_or_run
from care.curate.judges.base import Judge, JudgePair
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.labelling import label_pairs
from care.curate.judges.voting import POSITIVE, VotingConfig
from care.data.io import write_json, write_jsonl
from care.data.retrieval import load_retrieval_folder
from care.encoders.base import Encoder, LexicalRetriever
from care.errors import CareError

logger = logging.getLogger(__name__)

DEFAULT_TOP_K = 10
MAX_EXAMPLES = 20


def task_relevance_threshold(task_dir: Path) -> int:
    """The qrels grade from which the task counts a document relevant: its ``task.json``'s, else 1."""
    from care.bench.task import TASK_FILE, TaskMetadata

    task_file = task_dir / TASK_FILE
    return TaskMetadata.from_task_file(task_file).relevance_threshold if task_file.is_file() else 1


def audit_benchmark(
    task_dir: str | Path,
    retriever: Encoder | LexicalRetriever,
    judges: Sequence[Judge],
    out_dir: str | Path,
    *,
    top_k: int = DEFAULT_TOP_K,
    split: str | None = None,
    cache: JudgmentCache | None = None,
    voting: VotingConfig | None = None,
    instruction: str | None = None,
    relevance_threshold: int | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Judge each query's top-``top_k`` documents that qrels does not mark relevant.

    ``relevance_threshold``: the qrels grade from which a document is gold (not re-judged); by default the task
    folder's ``task.json`` ``relevance_threshold`` (as the benchmark scores it), else 1.

    Writes ``out_dir/false_negatives.jsonl`` (one row per query with candidates: query, its gold
    documents and the likely false negatives with their grades) and ``out_dir/audit_report.json``.
    """
    if top_k < 1:  # --top-k 0 wrote an audit of nothing, as if the benchmark had no false negative
        raise CareError(f"audit: --top-k must be at least 1 (the paper audits the top {DEFAULT_TOP_K}), got {top_k}")
    voting = voting or VotingConfig()
    out_dir = Path(out_dir)
    task_dir = Path(task_dir)
    data = load_retrieval_folder(task_dir, split)
    if relevance_threshold is None:
        relevance_threshold = task_relevance_threshold(task_dir)
    run = load_or_run(retriever, task_dir / "corpus.jsonl", data.queries, top_k, out_dir / "work",
                      instruction=instruction, show_progress=show_progress)
    gold = {q: {d for d, s in row.items() if s >= relevance_threshold} for q, row in data.qrels.items()}
    pairs = [
        JudgePair(q, data.queries[q], d, data.corpus[d].full_text)
        for q in data.queries for d, _ in run[q][:top_k] if d not in gold.get(q, set())
    ]
    labelled = label_pairs(judges, pairs, cache, voting, show_progress=show_progress)
    rows = []
    for q in data.queries:
        found = []
        for rank, (d, score) in enumerate(run[q][:top_k], start=1):
            label = labelled.labels.get((q, d), (None, 0))[0]
            if d not in gold.get(q, set()) and label == POSITIVE:
                found.append({"doc_id": d, "rank": rank, "score": score, "text": data.corpus[d].full_text,
                              "grades": {j.id: labelled.grades[j.id].get((q, d)) for j in judges}})
        if found:
            rows.append({"query_id": q, "query": data.queries[q],
                         "gold": [{"doc_id": d, "text": data.corpus[d].full_text} for d in sorted(gold.get(q, set()))],
                         "false_negatives": found})
    write_jsonl(out_dir / "false_negatives.jsonl", rows)
    n_fn = sum(len(r["false_negatives"]) for r in rows)
    report = {
        "task": str(task_dir),
        "retriever": retriever.name,
        "top_k": top_k,
        "relevance_threshold": relevance_threshold,
        "queries": len(data.queries),
        "pairs_judged": len(pairs),
        "likely_false_negatives": n_fn,
        "queries_with_false_negatives": len(rows),
        "share_of_queries": len(rows) / len(data.queries),
        "false_negatives_per_query": n_fn / len(data.queries),
        **labelled.summary(voting),
        "examples": [
            {"query": r["query"], "gold": r["gold"][0]["text"] if r["gold"] else None,
             "false_negative": r["false_negatives"][0]["text"], "grades": r["false_negatives"][0]["grades"]}
            for r in rows[:MAX_EXAMPLES]
        ],
    }
    write_json(out_dir / "audit_report.json", report)
    logger.info("audit: %d likely false negatives in %d/%d queries", n_fn, len(rows), len(data.queries))
    return report
