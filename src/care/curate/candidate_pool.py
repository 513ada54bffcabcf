"""Candidate pooling: the union of every retriever's top-N documents per query.

Dense :class:`~care.encoders.base.Encoder` s encode the corpus chunk by chunk into a FAISS inner-product
index (only vectors and ids are held, never all texts); a
:class:`~care.encoders.base.LexicalRetriever` (BM25) indexes the corpus texts itself. Each
retriever's run is saved atomically under ``work_dir`` so a restarted build skips retrievers that
already finished; a saved run is reused only for the same corpus file (path, size, modification
time), query texts and instruction, so a work folder shared by two tasks (two audits into one
``--out``, an edited corpus) never serves one task's ranking to the other. The union keeps rank
order: every retriever's rank-1 document, then rank 2, ...
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from care.data.errors import DataFormatError
from care.data.fields import require_id
from care.data.io import iter_jsonl, write_jsonl
from care.data.retrieval import Document, iter_documents
from care.encoders.base import Encoder, LexicalRetriever
from care.hashes import hex_digest

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 2048
DEFAULT_BATCH_SIZE = 32
Run = dict[str, list[tuple[str, float]]]


def load_texts(path: str | Path, ids: Iterable[str]) -> dict[str, str]:
    """The full texts of the documents ``ids`` (one streaming pass; other documents are not kept)."""
    wanted = set(ids)
    found = {d.id: d.full_text for d in iter_documents(path) if d.id in wanted}
    missing = wanted - set(found)
    if missing:
        raise DataFormatError(path, f"{len(missing)} pooled document id(s) not in the corpus, e.g. {sorted(missing)[:3]}")
    return found


def _chunks(items: Iterable[Document], size: int) -> Iterator[list[Document]]:
    chunk: list[Document] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def dense_run(
    encoder: Encoder, corpus_path: str | Path, queries: Mapping[str, str], depth: int, *,
    instruction: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE, chunk_size: int = DEFAULT_CHUNK_SIZE,
    show_progress: bool = True,
) -> Run:
    """Top-``depth`` documents per query by inner product (exact FAISS flat index)."""
    import faiss

    index = faiss.IndexFlatIP(encoder.dim)
    doc_ids: list[str] = []
    bar = tqdm(desc=f"encode corpus ({encoder.name})", unit="doc", disable=not show_progress)
    for chunk in _chunks(iter_documents(corpus_path), chunk_size):
        vecs = encoder.encode_documents([d.full_text for d in chunk], batch_size=batch_size)
        index.add(np.ascontiguousarray(vecs, dtype=np.float32))
        doc_ids.extend(d.id for d in chunk)
        bar.update(len(chunk))
    bar.close()
    qids = list(queries)
    qvecs = encoder.encode_queries([queries[q] for q in qids], instruction=instruction, batch_size=batch_size)
    scores, idx = index.search(np.ascontiguousarray(qvecs, dtype=np.float32), min(depth, len(doc_ids)))
    return {
        qid: [(doc_ids[j], float(s)) for j, s in zip(idx[i], scores[i]) if j >= 0]
        for i, qid in enumerate(qids)
    }


def lexical_run(retriever: LexicalRetriever, corpus_path: str | Path, queries: Mapping[str, str], depth: int) -> Run:
    """Top-``depth`` documents per query from a lexical retriever (it holds the corpus texts)."""
    docs = list(iter_documents(corpus_path))
    retriever.index([d.id for d in docs], [d.full_text for d in docs])
    qids = list(queries)
    hits = retriever.search([queries[q] for q in qids], min(depth, len(docs)))
    return {qid: [(d, float(s)) for d, s in h] for qid, h in zip(qids, hits)}


def retriever_run(retriever: Encoder | LexicalRetriever, corpus_path: str | Path, queries: Mapping[str, str],
                  depth: int, *, instruction: str | None = None, show_progress: bool = True) -> Run:
    if isinstance(retriever, LexicalRetriever):
        return lexical_run(retriever, corpus_path, queries, depth)
    return dense_run(retriever, corpus_path, queries, depth, instruction=instruction, show_progress=show_progress)


def corpus_key(corpus_path: str | Path, instruction: str | None) -> str:
    """A short digest of what a run was computed from besides the retriever, the depth and the query texts:
    the corpus file (resolved path, size, modification time; not its content, so a large corpus is not
    read for it) and the query instruction."""
    path = Path(corpus_path)
    stat = path.stat()
    identity = [str(path.resolve()), stat.st_size, stat.st_mtime_ns, instruction]
    return hex_digest(json.dumps(identity, ensure_ascii=False), length=12)


def _run_path(work_dir: Path, retriever: Encoder | LexicalRetriever, depth: int, inputs: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in retriever.name)
    return work_dir / f"run.{safe}.{retriever.fingerprint[:12]}.top{depth}.{inputs}.jsonl"


def load_or_run(retriever: Encoder | LexicalRetriever, corpus_path: str | Path, queries: Mapping[str, str],
                depth: int, work_dir: str | Path | None, *, instruction: str | None = None,
                show_progress: bool = True) -> Run:
    """:func:`retriever_run`, saved to / reused from ``work_dir``.

    The saved run is keyed by the retriever's fingerprint, the depth and :func:`corpus_key`, and each row
    keeps its query text: it is reused only when every query of ``queries`` is in it with the same text,
    else the retriever runs again (and its run replaces the saved one).
    """
    path = _run_path(Path(work_dir), retriever, depth, corpus_key(corpus_path, instruction)) if work_dir else None
    if path is not None and path.is_file():
        run: Run = {}
        texts: dict[str, str | None] = {}
        for _, row in iter_jsonl(path):
            run[row["query_id"]] = [(d, s) for d, s in row["hits"]]
            texts[row["query_id"]] = row.get("query")
        if all(texts.get(q, None) == text for q, text in queries.items()):
            logger.info("reusing %s", path)
            return {q: run[q] for q in queries}
    run = retriever_run(retriever, corpus_path, queries, depth, instruction=instruction, show_progress=show_progress)
    if path is not None:
        write_jsonl(path, ({"query_id": q, "query": queries[q], "hits": [[d, s] for d, s in hits]}
                           for q, hits in run.items()))
    return run


def union_pool(runs: Sequence[Run], depth: int) -> dict[str, list[str]]:
    """Union of each run's top-``depth``, interleaved by rank, without duplicates."""
    pool: dict[str, list[str]] = {}
    qids = list(dict.fromkeys(q for run in runs for q in run))
    for qid in qids:
        seen: dict[str, None] = {}
        for rank in range(depth):
            for run in runs:
                hits = run.get(qid, [])
                if rank < len(hits):
                    seen.setdefault(hits[rank][0], None)
        pool[qid] = list(seen)
    return pool


def pool_candidates(
    retrievers: Sequence[Encoder | LexicalRetriever], corpus_path: str | Path, queries: Mapping[str, str],
    depth: int, *, work_dir: str | Path | None = None, instruction: str | None = None, show_progress: bool = True,
) -> dict[str, list[str]]:
    """``{query_id: [doc_id, ...]}``: union of every retriever's top-``depth``."""
    runs = [load_or_run(r, corpus_path, queries, depth, work_dir, instruction=instruction, show_progress=show_progress)
            for r in retrievers]
    pool = union_pool(runs, depth)
    logger.info("pooled %d pairs for %d queries from %d retriever(s)", sum(map(len, pool.values())), len(pool), len(runs))
    return pool


def write_pool(path: str | Path, pool: Mapping[str, Sequence[str]]) -> None:
    write_jsonl(path, ({"query_id": q, "doc_ids": list(d)} for q, d in pool.items()))


def read_pool(path: str | Path) -> dict[str, list[str]]:
    path = Path(path)
    pool = {}
    for line, row in iter_jsonl(path):
        if not isinstance(row.get("doc_ids"), list):
            raise DataFormatError(path, "expected a doc_ids list", line=line, field="doc_ids")
        pool[require_id(row, "query_id", path, line)] = [str(d) for d in row["doc_ids"]]
    return pool
