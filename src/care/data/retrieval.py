"""BEIR/MTEB-style retrieval folders: ``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``.

- ``corpus.jsonl``: one ``{"id", "text", "title"?}`` per line; any other field is the document's
  ``metadata`` (kept by the index's document store, where ``/search`` filters on it);
- ``queries.jsonl``: one ``{"id", "text"}`` per line;
- ``qrels.tsv``: tab-separated ``query-id  corpus-id  score`` with that header line; scores are
  non-negative integers (graded relevance allowed; a task declares the threshold for binary metrics).

Folders exactly as BEIR publishes them load too: ids in ``_id`` (other fields such as ``metadata``
become the document's metadata), a document with a title and an empty text, and qrels in
``qrels/<split>.tsv``.

These readers are the only ones of these formats: every command (bench, index build, run, train,
mining, curate, vocabulary) reads a corpus through :func:`iter_documents` / :func:`load_corpus`, so a
folder one command accepts, every command accepts.

Splits: with a split, its qrels come from ``{split}_qrels.tsv`` or ``qrels/{split}.tsv`` and its
queries from ``{split}_queries.jsonl`` when present, else ``queries.jsonl`` (BEIR keeps one query
file for every split); a split whose qrels are missing is refused, naming the splits the folder
has. Without a split, ``qrels.tsv`` is read; a folder that has none (BEIR) uses ``test`` when
``qrels/test.tsv`` exists, else its only split (:func:`default_split`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import (
    reject_surrogate,
    require_document_text,
    require_id,
    require_text,
)
from care.data.io import atomic_write, iter_jsonl, iter_text_lines, write_jsonl
from care.data.text_rules import has_visible

QRELS_HEADER = ("query-id", "corpus-id", "score")
QRELS_FILE = "qrels.tsv"
QRELS_DIR = "qrels"
#: BEIR's id field; ``id`` is ours. Either is accepted.
BEIR_ID = "_id"
#: Corpus fields that are not metadata.
DOCUMENT_FIELDS = ("id", BEIR_ID, "title", "text")
#: The split BEIR evaluates on, used when a BEIR folder is read without a split.
BEIR_EVAL_SPLIT = "test"


@dataclass(frozen=True)
class Document:
    """One corpus entry. ``full_text`` joins the optional title and the text as encoders see them;
    ``metadata`` holds the row's other fields (not compared, not hashed)."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def full_text(self) -> str:
        return f"{self.title} {self.text}".strip() if self.title else self.text


@dataclass
class RetrievalData:
    """A loaded retrieval task: ``corpus[id]``, ``queries[id]`` and ``qrels[query_id][doc_id] = grade``."""

    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)


def row_id(obj: dict[str, Any], path: Path, line: int) -> str:
    """A row's id from ``id`` or BEIR's ``_id`` (both present must agree), naming file and line when absent."""
    if "id" not in obj and BEIR_ID in obj:
        return require_id(obj, BEIR_ID, path, line)
    value = require_id(obj, "id", path, line)
    if BEIR_ID in obj and str(obj[BEIR_ID]) != value:
        raise DataFormatError(path, f"'id' {value!r} and '_id' {obj[BEIR_ID]!r} differ", line=line, field="id",
                              hint="keep one id field")
    return value


def is_title_only(obj: Mapping[str, Any], key: str = "text") -> bool:
    """Whether a corpus row is BEIR's title-only document: a title that shows something beside a ``key``
    string that shows nothing (:func:`parse_document` keeps it, with the text ``""``). Readers that want a
    row's text alone (pretraining texts, pairs) skip such a row rather than refuse the corpus."""
    title, text = obj.get("title"), obj.get(key)
    return isinstance(title, str) and has_visible(title) and isinstance(text, str) and not has_visible(text)


def parse_document(obj: dict[str, Any], path: Path, line: int) -> Document:
    """One corpus row as a :class:`Document` (``id`` or ``_id``).

    A title with an empty text is accepted, as in BEIR (so is a text with nothing visible beside a visible
    title: it is kept as ``""``); otherwise the text must show something
    (:func:`care.data.fields.require_document_text`).
    """
    doc_id = row_id(obj, path, line)
    title = obj.get("title") or ""
    if not isinstance(title, str):
        raise DataFormatError(path, "title must be a string", line=line, field="title")
    reject_surrogate(title, path, line, "title")
    metadata = {k: v for k, v in obj.items() if k not in DOCUMENT_FIELDS}
    if is_title_only(obj):
        return Document(doc_id, "", title, metadata)
    return Document(doc_id, require_document_text(obj, "text", path, line), title, metadata)


def iter_numbered_documents(path: str | Path) -> Iterator[tuple[int, Document]]:
    """Stream ``corpus.jsonl`` as ``(line, Document)``; a repeated id is refused naming both lines.

    Only the ids (and their line numbers) are kept in memory, so any corpus size streams.
    """
    path = Path(path)
    first_line: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        doc = parse_document(obj, path, line)
        if doc.id in first_line:
            raise DataFormatError(
                path, f"duplicate id {doc.id!r} (first seen on line {first_line[doc.id]})", line=line,
                field="id", hint="ids must be unique; merge or rename the duplicates",
            )
        first_line[doc.id] = line
        yield line, doc


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Stream ``corpus.jsonl`` as validated :class:`Document` s (:func:`iter_numbered_documents` without lines)."""
    return (doc for _, doc in iter_numbered_documents(path))


def check_corpus(path: str | Path) -> int:
    """Validate a whole corpus file (every row, unique ids) before any work is spent on it; returns its size."""
    n = sum(1 for _ in iter_documents(path))
    if not n:
        raise DataFormatError(path, "no documents", hint="the corpus needs at least one {\"id\", \"text\"} line")
    return n


def load_corpus(path: str | Path) -> dict[str, Document]:
    """Load ``corpus.jsonl``; rejects duplicate ids and empty texts, naming the line."""
    corpus = {doc.id: doc for doc in iter_documents(path)}
    if not corpus:
        raise DataFormatError(path, "no documents", hint="the corpus needs at least one {\"id\", \"text\"} line")
    return corpus


def load_queries(path: str | Path) -> dict[str, str]:
    """Load ``queries.jsonl`` as ``{id: text}`` (``id`` or ``_id``); rejects duplicate ids and empty texts."""
    path = Path(path)
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        qid = row_id(obj, path, line)
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
            hint = (f"line 1 looks like a header: spell it {chr(9).join(QRELS_HEADER)!r} (tab-separated)" if line == 1
                    else "grades are integers >= 0 (0: judged irrelevant); write 1.0 as 1")
            raise DataFormatError(path, f"score {score_s!r} is not an integer", line=line, field="score",
                                  hint=hint) from None
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
            raise DataFormatError(path, f"pair ({qid}, {did}) listed twice", line=line, field="corpus-id",
                                  hint=f"keep one row per pair, with its grade (the other says {row[did]})")
        row[did] = score
    return qrels


def available_splits(folder: str | Path) -> list[str]:
    """The splits a folder has qrels for: ``{split}_qrels.tsv`` and ``qrels/{split}.tsv`` (sorted)."""
    folder = Path(folder)
    found = {p.name[: -len("_" + QRELS_FILE)] for p in folder.glob(f"*_{QRELS_FILE}") if p.is_file()}
    if (folder / QRELS_DIR).is_dir():
        found |= {p.stem for p in (folder / QRELS_DIR).glob("*.tsv") if p.is_file()}
    return sorted(found)


def default_split(folder: str | Path) -> str | None:
    """The split read when none is asked for: None when ``qrels.tsv`` exists; else (a BEIR folder)
    ``test`` when it has qrels for it, else its only split; None when there is nothing to choose."""
    folder = Path(folder)
    if (folder / QRELS_FILE).is_file():
        return None
    splits = available_splits(folder)
    if BEIR_EVAL_SPLIT in splits:
        return BEIR_EVAL_SPLIT
    return splits[0] if len(splits) == 1 else None


def split_files(folder: str | Path, split: str | None) -> tuple[Path, Path]:
    """``(queries file, qrels file)`` of ``split`` in a task folder (rules in the module docstring).

    Raises:
        DataFormatError: the split has no qrels file (the message lists the splits the folder has),
            or no split was asked for and the folder has neither ``qrels.tsv`` nor a single obvious split.
    """
    folder = Path(folder)
    split = split or default_split(folder)
    if split is None:
        if (folder / QRELS_FILE).is_file():
            return folder / "queries.jsonl", folder / QRELS_FILE
        splits = available_splits(folder)
        raise DataFormatError(folder, f"no {QRELS_FILE}" + (f"; it has splits {', '.join(splits)}" if splits else ""),
                              hint="choose one with --split" if splits else
                              f"add {QRELS_FILE} (or qrels/<split>.tsv as BEIR publishes it)")
    qrels = next((c for c in (folder / f"{split}_{QRELS_FILE}", folder / QRELS_DIR / f"{split}.tsv") if c.is_file()), None)
    if qrels is None:
        splits = available_splits(folder)
        has = f"its splits are: {', '.join(splits)}" if splits else f"it has no split files, only the default {QRELS_FILE}"
        raise DataFormatError(folder, f"no qrels for split {split!r} (looked for {split}_{QRELS_FILE} and "
                              f"{QRELS_DIR}/{split}.tsv)", hint=f"{has}; pick one of those or leave --split out")
    queries = folder / f"{split}_queries.jsonl"
    return (queries if queries.is_file() else folder / "queries.jsonl"), qrels


def load_retrieval_folder(folder: str | Path, split: str | None = None) -> RetrievalData:
    """Load and cross-validate a retrieval task folder (ours or BEIR's; splits in the module docstring).

    Queries without any qrels row are dropped (they cannot be scored), as BEIR does.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataFormatError(folder, "task folder not found", hint="give a folder holding corpus.jsonl, queries.jsonl, qrels.tsv")
    queries_path, qrels_path = split_files(folder, split)
    corpus = load_corpus(folder / "corpus.jsonl")
    queries = load_queries(queries_path)
    qrels = load_qrels(qrels_path, query_ids=queries, corpus_ids=corpus)
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    if not queries:
        raise DataFormatError(folder, "no query has a qrels row", hint=f"check that {qrels_path.name} uses the ids of {queries_path.name}")
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels)


def document_row(doc: Document) -> dict[str, Any]:
    """A :class:`Document` as its ``corpus.jsonl`` object (the inverse of :func:`parse_document`)."""
    return {"id": doc.id, "text": doc.text, **({"title": doc.title} if doc.title else {}), **doc.metadata}


def write_retrieval_folder(
    folder: str | Path,
    corpus: Iterable[Document],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    write_corpus: bool = True,
) -> None:
    """Write a retrieval folder atomically file by file (the inverse of :func:`load_retrieval_folder`);
    ``write_corpus=False`` writes the queries and qrels only (the caller provides ``corpus.jsonl``)."""
    folder = Path(folder)
    if write_corpus:
        write_jsonl(folder / "corpus.jsonl", (document_row(d) for d in corpus))
    write_jsonl(folder / "queries.jsonl", ({"id": qid, "text": t} for qid, t in queries.items()))
    with atomic_write(folder / "qrels.tsv") as fh:
        fh.write("\t".join(QRELS_HEADER) + "\n")
        for qid, row in qrels.items():
            for did, score in row.items():
                fh.write(f"{qid}\t{did}\t{int(score)}\n")
