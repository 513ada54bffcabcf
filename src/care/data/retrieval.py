"""BEIR/MTEB-style retrieval folders: ``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``.

- ``corpus.jsonl``: one ``{"id", "text", "title"?}`` per line;
- ``queries.jsonl``: one ``{"id", "text"}`` per line;
- ``qrels.tsv``: tab-separated ``query-id  corpus-id  score`` with that header line; scores are
  non-negative integers (graded relevance allowed; a task declares the threshold for binary metrics).

A split other than the default reads ``{split}_queries.jsonl`` / ``{split}_qrels.tsv`` (or
``qrels/{split}.tsv``) when present, so a folder can hold e.g. ``test_qrels.tsv`` beside ``qrels.tsv``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from care.data.errors import DataFormatError
from care.data.fields import require_id, require_text
from care.data.io import atomic_write, iter_jsonl, iter_text_lines, write_jsonl

QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass(frozen=True)
class Document:
    """One corpus entry. ``full_text`` joins the optional title and the text as encoders see them."""

    id: str
    text: str
    title: str = ""

    @property
    def full_text(self) -> str:
        return f"{self.title} {self.text}".strip() if self.title else self.text


@dataclass
class RetrievalData:
    """A loaded retrieval task: ``corpus[id]``, ``queries[id]`` and ``qrels[query_id][doc_id] = grade``."""

    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)


def load_corpus(path: str | Path) -> dict[str, Document]:
    """Load ``corpus.jsonl``; rejects duplicate ids and empty texts, naming the line."""
    path = Path(path)
    corpus: dict[str, Document] = {}
    first_line: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        doc_id = require_id(obj, "id", path, line)
        text = require_text(obj, "text", path, line)
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise DataFormatError(path, "title must be a string", line=line, field="title")
        if doc_id in corpus:
            raise DataFormatError(
                path, f"duplicate id {doc_id!r} (first seen on line {first_line[doc_id]})", line=line,
                field="id", hint="ids must be unique; merge or rename the duplicates",
            )
        corpus[doc_id] = Document(doc_id, text, title)
        first_line[doc_id] = line
    if not corpus:
        raise DataFormatError(path, "no documents", hint="the corpus needs at least one {\"id\", \"text\"} line")
    return corpus


def load_queries(path: str | Path) -> dict[str, str]:
    """Load ``queries.jsonl`` as ``{id: text}``; rejects duplicate ids and empty texts."""
    path = Path(path)
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        qid = require_id(obj, "id", path, line)
        text = require_text(obj, "text", path, line)
        if qid in queries:
            raise DataFormatError(
                path, f"duplicate id {qid!r} (first seen on line {first_line[qid]})", line=line,
                field="id", hint="ids must be unique",
            )
        queries[qid] = text
        first_line[qid] = line
    if not queries:
        raise DataFormatError(path, "no queries", hint="add at least one {\"id\", \"text\"} line")
    return queries


def load_qrels(
    path: str | Path,
    *,
    query_ids: Iterable[str] | None = None,
    corpus_ids: Iterable[str] | None = None,
) -> dict[str, dict[str, int]]:
    """Load a ``qrels.tsv`` as ``{query_id: {doc_id: grade}}``.

    Args:
        path: the TSV file (header line ``query-id corpus-id score`` is expected and skipped).
        query_ids / corpus_ids: when given, every row must reference known ids.
    Raises:
        DataFormatError: wrong column count, a non-integer or negative score, an unknown id,
        or a pair listed twice — naming the line.
    """
    path = Path(path)
    known_q = set(query_ids) if query_ids is not None else None
    known_d = set(corpus_ids) if corpus_ids is not None else None
    qrels: dict[str, dict[str, int]] = {}
    for line, raw in iter_text_lines(path):
        if not raw.strip():
            continue
        cols = raw.split("\t")
        if line == 1 and tuple(c.strip().lower() for c in cols) == QRELS_HEADER:
            continue
        if len(cols) != 3:
            raise DataFormatError(
                path, f"expected 3 tab-separated columns, found {len(cols)}", line=line,
                hint="rows are: query-id<TAB>corpus-id<TAB>score",
            )
        qid, did, score_s = (c.strip() for c in cols)
        try:
            score = int(score_s)
        except ValueError:
            raise DataFormatError(path, f"score {score_s!r} is not an integer", line=line, field="score") from None
        if score < 0:
            raise DataFormatError(path, f"negative score {score}", line=line, field="score",
                                  hint="use 0 for judged-irrelevant pairs")
        if known_q is not None and qid not in known_q:
            raise DataFormatError(path, f"unknown query id {qid!r}", line=line, field="query-id",
                                  hint="every qrels query must appear in queries.jsonl")
        if known_d is not None and did not in known_d:
            raise DataFormatError(path, f"unknown corpus id {did!r}", line=line, field="corpus-id",
                                  hint="every qrels document must appear in corpus.jsonl")
        row = qrels.setdefault(qid, {})
        if did in row:
            raise DataFormatError(path, f"pair ({qid}, {did}) listed twice", line=line)
        row[did] = score
    return qrels


def _split_file(folder: Path, stem: str, suffix: str, split: str | None) -> Path:
    if split:
        for candidate in (folder / f"{split}_{stem}{suffix}", folder / stem / f"{split}{suffix}"):
            if candidate.is_file():
                return candidate
    return folder / f"{stem}{suffix}"


def load_retrieval_folder(folder: str | Path, split: str | None = None) -> RetrievalData:
    """Load and cross-validate a retrieval task folder.

    Queries without any qrels row are dropped (they cannot be scored), as BEIR does.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataFormatError(folder, "task folder not found", hint="give a folder holding corpus.jsonl, queries.jsonl, qrels.tsv")
    corpus = load_corpus(folder / "corpus.jsonl")
    queries = load_queries(_split_file(folder, "queries", ".jsonl", split))
    qrels = load_qrels(_split_file(folder, "qrels", ".tsv", split), query_ids=queries, corpus_ids=corpus)
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    if not queries:
        raise DataFormatError(folder, "no query has a qrels row", hint="check that qrels.tsv uses the ids of queries.jsonl")
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels)


def write_retrieval_folder(
    folder: str | Path,
    corpus: Iterable[Document],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
) -> None:
    """Write a retrieval folder atomically file by file (the inverse of :func:`load_retrieval_folder`)."""
    folder = Path(folder)
    write_jsonl(folder / "corpus.jsonl", (
        {"id": d.id, "text": d.text, **({"title": d.title} if d.title else {})} for d in corpus
    ))
    write_jsonl(folder / "queries.jsonl", ({"id": qid, "text": t} for qid, t in queries.items()))
    with atomic_write(folder / "qrels.tsv") as fh:
        fh.write("\t".join(QRELS_HEADER) + "\n")
        for qid, row in qrels.items():
            for did, score in row.items():
                fh.write(f"{qid}\t{did}\t{int(score)}\n")
