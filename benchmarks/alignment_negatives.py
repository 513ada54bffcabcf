"""How often do Stage I hard negatives turn out to be false negatives, with and without the near-duplicate filter?

On a retrieval folder with qrels (e.g. the toyhom dev set), mine one hard negative per text with
:class:`care.train.recipes.alignment_data.LexicalNegativeMiner` (BM25 + jieba):

- query side: a mined ``q⁻`` is a *false negative* when it shares a relevant document with ``q``
  (two phrasings of one question);
- document side: ``d⁻`` is a false negative when it is relevant to a query that ``d`` is relevant to.

Each side is mined twice: with the default near-duplicate filter (character-bigram Jaccard >= 0.8
skipped) and with only exact-duplicate removal (threshold above 1). Writes a JSON report.

    python -m benchmarks.alignment_negatives "$CARE_DEV_SET" \
        --name toyhom   # -> benchmarks/results/alignment_negatives/toyhom.json
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import defaultdict
from pathlib import Path

from benchmarks._common import RESULTS, portable
from benchmarks.bench_results import save
from care.data.retrieval import load_corpus, load_qrels, load_queries
from care.train.recipes.alignment_data import DEFAULT_MAX_CHAR_OVERLAP, LexicalNegativeMiner

logger = logging.getLogger("alignment_negatives")

#: A threshold above any Jaccard value: only exact (normalised) duplicates are skipped.
NO_FILTER = 1.01


def false_negative_rate(texts: list[str], related: list[set[str]], max_char_overlap: float) -> dict[str, float]:
    """Mine one negative per text; return the share of texts whose negative shares a relevance key with it."""
    start = time.perf_counter()
    mined = LexicalNegativeMiner(max_char_overlap=max_char_overlap).mine(texts, 1, role="query")
    seconds = time.perf_counter() - start
    with_neg = [(i, m[0]) for i, m in enumerate(mined) if m]
    false = sum(1 for i, j in with_neg if related[i] & related[j])
    return {
        "max_char_overlap": max_char_overlap,
        "texts": len(texts),
        "texts_with_negative": len(with_neg),
        "false_negatives": false,
        "false_negative_rate": false / max(1, len(with_neg)),
        "seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="retrieval folder with queries.jsonl, corpus.jsonl, qrels.tsv")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--name", default="toyhom", help="record name (benchmarks/results/alignment_negatives/NAME.json)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N queries (and their documents)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    queries = load_queries(args.folder / "queries.jsonl")
    corpus = load_corpus(args.folder / "corpus.jsonl")
    qrels = load_qrels(args.folder / "qrels.tsv")
    qids = [q for q in queries if q in qrels][: args.limit]
    docs_of = {q: {d for d, g in qrels[q].items() if g > 0} for q in qids}
    queries_of: dict[str, set[str]] = defaultdict(set)
    for q in qids:
        for d in docs_of[q]:
            queries_of[d].add(q)
    dids = sorted(queries_of)

    report: dict[str, object] = {"folder": portable(args.folder), "limit": args.limit, "miner": "BM25 (bm25s, jieba)"}
    for side, texts, related in (
        ("query_side", [queries[q] for q in qids], [docs_of[q] for q in qids]),
        ("document_side", [corpus[d].text for d in dids], [queries_of[d] for d in dids]),
    ):
        report[side] = {
            "near_duplicate_filter": false_negative_rate(texts, related, DEFAULT_MAX_CHAR_OVERLAP),
            "exact_duplicates_only": false_negative_rate(texts, related, NO_FILTER),
        }
        logger.info("%s: %s", side, report[side])
    sides = ("query_side", "document_side")
    path = save("alignment_negatives", args.name, config={k: report[k] for k in report if k not in sides},
                scores={k: report[k] for k in sides if k in report}, results=args.out)
    logger.info("wrote %s", path)


if __name__ == "__main__":
    main()
