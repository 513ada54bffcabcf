"""The document store: index row number -> document id, title, text and metadata, in SQLite.

A vector index returns row numbers; the service turns them into documents with one indexed
``SELECT``. SQLite keeps the store a single file that opens instantly (nothing is read into memory)
and is safe to read from many threads. The documents come from :mod:`care.data.retrieval` (the one
corpus reader); metadata is :attr:`~care.data.retrieval.Document.metadata`, every corpus field other than
``id`` / ``_id``, ``text`` and ``title`` (e.g. ``"department": "cardiology"``), stored as JSON;
``/search`` filters match on it.

The service opens the store read-only (SQLite's ``mode=ro``), runs SQLite's ``PRAGMA quick_check`` at start-up
(:meth:`DocumentStore.check`: 0.12-0.27 s for a 132-238 MiB store, docs/serve.md), and turns any SQLite error
while answering into :class:`DocumentReadError` — never a shorter answer. SQLite keeps no checksum of a row's
content, so each row carries its own (``crc``: CRC-32 of its id, title, text and metadata, :func:`row_crc`),
checked on every read: a flipped byte inside a document's text is an error at its first read whatever was
checked at start-up (stores written before the column existed are read without it).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.retrieval import Document
from care.errors import CareError
from care.index.integrity import IndexDamagedError

logger = logging.getLogger(__name__)

#: Rows inserted per transaction while building.
INSERT_BATCH = 10_000
SCHEMA = (
    "CREATE TABLE docs (row INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL, "
    "text TEXT NOT NULL, meta TEXT NOT NULL, crc INTEGER NOT NULL)"
)
#: The row checksum column (absent from stores written before it existed).
CRC_COLUMN = "crc"
#: Joins a row's fields before hashing (the ASCII unit separator: not in ids, and a boundary marker in texts).
FIELD_SEPARATOR = "\x1f"
#: Problems of ``PRAGMA quick_check`` quoted in the error (it lists up to 100).
QUOTED_PROBLEMS = 3
#: Filter values may be scalars or lists of scalars (any of).
FilterValue = str | int | float | bool | list[str | int | float | bool]


@dataclass(frozen=True)
class StoredDocument:
    """One document as the service returns it."""

    row: int
    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def matches(self, filters: Mapping[str, FilterValue] | None) -> bool:
        """True when every filter field equals the metadata value (or is one of a list of values).

        A metadata list matches when it shares a value with the filter (tags-style fields).
        """
        if not filters:
            return True
        for key, wanted in filters.items():
            if key not in self.metadata:
                return False
            have = self.metadata[key]
            wanted_set = set(wanted) if isinstance(wanted, list) else {wanted}
            have_set = set(have) if isinstance(have, list) else {have}
            if not wanted_set & have_set:
                return False
        return True


def row_crc(doc_id: str, title: str, text: str, meta: str) -> int:
    """CRC-32 of one row's stored fields (``meta``: the metadata's JSON text as stored)."""
    return zlib.crc32(FIELD_SEPARATOR.join((doc_id, title, text, meta)).encode("utf-8", "surrogatepass"))


def build_docstore(path: str | Path, rows: Iterable[tuple[int, Document]], *, source: str = "corpus") -> int:
    """Write a document store atomically from ``(line_number, document)`` pairs in row order
    (:func:`care.data.retrieval.iter_numbered_documents`).

    Returns:
        The number of documents.
    Raises:
        DataFormatError: a duplicate id (naming both lines).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)
    conn = sqlite3.connect(tmp)
    count = 0
    try:
        conn.execute(SCHEMA)
        batch: list[tuple[Any, ...]] = []
        lines: dict[int, int] = {}
        for line, doc in rows:
            meta = json.dumps(doc.metadata, ensure_ascii=False)
            batch.append((count, doc.id, doc.title, doc.text, meta, row_crc(doc.id, doc.title, doc.text, meta)))
            lines[count] = line
            count += 1
            if len(batch) >= INSERT_BATCH:
                _insert(conn, batch, lines, source)
                batch, lines = [], {}
        _insert(conn, batch, lines, source)
        conn.commit()
    except BaseException:
        conn.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    conn.close()
    os.replace(tmp, path)
    return count


def _insert(conn: sqlite3.Connection, batch: list[tuple[Any, ...]], lines: dict[int, int], source: str) -> None:
    try:
        conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?)", batch)
    except sqlite3.IntegrityError:
        for row in batch:  # find the culprit to name its line
            try:
                conn.execute("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?)", row)
            except sqlite3.IntegrityError:
                raise DataFormatError(Path(source), f"duplicate id {row[1]!r}", line=lines.get(row[0]), field="id",
                                      hint="ids must be unique") from None


class DocumentReadError(CareError):
    """The document store failed while answering (a damaged page, an unreadable row): a server error."""


class DocumentStore:
    """Read-only access to a store written by :func:`build_docstore` (thread-safe)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise CareError(f"document store {self.path} is missing; rebuild the index with 'care index build'")
        self._local = threading.local()
        try:
            self._count = int(self._conn().execute("SELECT COUNT(*) FROM docs").fetchone()[0])
            columns = {str(row[1]) for row in self._conn().execute("PRAGMA table_info(docs)")}
        except sqlite3.DatabaseError as exc:
            raise CareError(f"document store {self.path} is corrupt ({exc}); rebuild the index with 'care index build'") from None
        self.has_row_checksums = CRC_COLUMN in columns
        if not self.has_row_checksums:
            logger.warning("document store %s predates row checksums: a damaged row's text cannot be told from the "
                           "original; rebuild the index with 'care index build' to add them", self.path)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            uri = self.path.resolve().as_uri() + "?mode=ro"  # as_uri escapes '?', '#' and '%' in the path
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._local.conn = conn
        return conn

    def __len__(self) -> int:
        return self._count

    def check(self) -> None:
        """SQLite's ``PRAGMA quick_check`` of the whole file (every page read once; no index cross-check).

        Raises:
            IndexDamagedError: the file is damaged, quoting SQLite's first problems.
        """
        try:
            problems = [" ".join(str(row[0]).split()) for row in self._conn().execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems != ["ok"]:
            raise IndexDamagedError(f"document store {self.path} is damaged: SQLite's quick_check reports "
                            f"{'; '.join(problems[:QUOTED_PROBLEMS])}; rebuild the index with 'care index build'")

    def get(self, rows: Sequence[int]) -> dict[int, StoredDocument]:
        """Documents for the given row numbers (unknown rows are left out; the caller decides whether one missing
        is an error).

        Raises:
            DocumentReadError: SQLite failed to read the rows, a row's content differs from its checksum, or its
                metadata is not JSON (a damaged store).
        """
        wanted = [int(r) for r in rows if int(r) >= 0]
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        crc = CRC_COLUMN if self.has_row_checksums else "NULL"
        try:
            cursor = self._conn().execute(f"SELECT row, id, title, text, meta, {crc} FROM docs WHERE row IN ({marks})",
                                          wanted)
            found = {}
            for row, doc_id, title, text, meta, stored_crc in cursor:
                if stored_crc is not None and stored_crc != row_crc(doc_id, title, text, meta):
                    raise ValueError(f"row {row}'s content does not match its checksum")
                found[row] = StoredDocument(row, doc_id, title, text, json.loads(meta))
            return found
        except (sqlite3.Error, ValueError, TypeError) as exc:  # ValueError: a checksum, JSON or UTF-8 of a damaged row
            raise DocumentReadError(f"document store {self.path} failed to read rows {wanted[:QUOTED_PROBLEMS]}"
                                    f"{'...' if len(wanted) > QUOTED_PROBLEMS else ''} ({type(exc).__name__}: {exc}); "
                                    "it is damaged — rebuild the index with 'care index build'") from exc
