"""BM25 hard negatives for training rows (used by ``care run``'s label step and the dev-set benchmarks).

:func:`mine_negatives` gives training examples (:class:`~care.data.training.TrainingExample`) ``n``
hard negatives each: BM25's top candidates for the query among ``corpus_texts``, skipping a
candidate that is a positive or overlaps one heavily (a likely false negative — near-duplicate
answers are common in consultation data), then random non-positive texts when BM25 finds too few.
Negatives a row already has are kept first (``keep_existing``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from care.data.training import TrainingExample
from care.errors import CareError
from care.train.recipes.alignment_data import char_overlap

#: Hard negatives per training query (the paper's Stage II: 7).
N_MINED_NEGATIVES = 7
#: BM25 depth searched for hard negatives.
MINING_DEPTH = 30
#: A candidate this similar (char-bigram Jaccard) to a positive is a likely false negative: skipped.
MAX_NEGATIVE_OVERLAP = 0.5


def mine_negatives(
    rows: Sequence[TrainingExample],
    corpus_texts: Sequence[str],
    *,
    n: int = N_MINED_NEGATIVES,
    depth: int = MINING_DEPTH,
    max_overlap: float = MAX_NEGATIVE_OVERLAP,
    seed: int = 0,
    keep_existing: bool = False,
) -> list[TrainingExample]:
    """Training rows (read by :mod:`care.data.training`) -> the same rows with ``n`` negatives each.

    Args:
        rows: training examples.
        corpus_texts: the pool negatives are drawn from (needs at least ``n`` texts besides the positives).
        n: negatives per row; depth: BM25 candidates searched; max_overlap: near-duplicate threshold.
        seed: seed of the random fill.
        keep_existing: keep a row's own ``neg`` first and only top it up to ``n``.
    Returns:
        New examples (other fields kept; ``neg_scores`` dropped where the negatives changed).
    """
    from care.encoders.bm25 import BM25Retriever

    if len(set(corpus_texts)) <= n:
        raise CareError(f"mine_negatives: the pool has {len(set(corpus_texts))} distinct texts, need more than {n}")
    bm25 = BM25Retriever()
    bm25.index([str(i) for i in range(len(corpus_texts))], list(corpus_texts))
    hits = bm25.search([r.query for r in rows], depth)
    rng = np.random.default_rng(seed)
    out = []
    for row, ranked in zip(rows, hits):
        pos = row.pos
        neg: list[str] = list(row.neg)[:n] if keep_existing else []
        for doc_id, _ in ranked:
            if len(neg) >= n:
                break
            text = corpus_texts[int(doc_id)]
            if text in pos or text in neg or any(char_overlap(text, p) >= max_overlap for p in pos):
                continue
            neg.append(text)
        while len(neg) < n:  # too few lexical neighbours: random fill
            text = corpus_texts[int(rng.integers(len(corpus_texts)))]
            if text not in pos and text not in neg:
                neg.append(text)
        out.append(row if tuple(neg) == row.neg else replace(row, neg=tuple(neg), neg_scores=None))
    return out
