"""A persistent SQLite cache of every judgment, keyed by (judge id, judge fingerprint, query, passage).

Texts are stored as SHA-256 digests. Usage is written as it happens: a request is counted as
``sent`` before it leaves, and each reply's tokens and cost the moment it returns (the runner
subscribes :meth:`JudgmentCache.add_usage` to the judge's meter), so a kill -9 loses no cost and the
``usage`` table holds the totals of every run, resumed or not; requests sent but never answered
show as :attr:`~care.curate.judges.base.Usage.unrecorded`. Grades are committed when a judge call
returns. The cache is safe to share between threads (one connection behind a lock).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path

from care.curate.judges.base import Usage
from care.hashes import hex_digest

SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    judge_id TEXT NOT NULL, fingerprint TEXT NOT NULL, query_hash TEXT NOT NULL, passage_hash TEXT NOT NULL,
    grade TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (judge_id, fingerprint, query_hash, passage_hash)
);
CREATE TABLE IF NOT EXISTS usage (
    judge_id TEXT PRIMARY KEY, calls INTEGER NOT NULL, retries INTEGER NOT NULL, reasks INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL
);
"""
LOOKUP_CHUNK = 500
#: Usage columns, in :class:`Usage` field order (``sent`` and ``errors`` are added to older caches).
USAGE_COLUMNS = tuple(f.name for f in fields(Usage))


def text_hash(text: str) -> str:
    return hex_digest(text)


class JudgmentCache:
    """``get_many`` / ``put_many`` of grades; ``usage`` totals per judge across runs."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        present = {row[1] for row in self._db.execute("PRAGMA table_info(usage)")}
        for column in USAGE_COLUMNS:
            if column not in present:  # a cache written by an older version
                kind = "REAL" if column == "cost_usd" else "INTEGER"
                self._db.execute(f"ALTER TABLE usage ADD COLUMN {column} {kind} NOT NULL DEFAULT 0")
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> JudgmentCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, judge_id: str, fingerprint: str, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Cached grades for ``(query, passage)`` pairs (absent pairs are left out)."""
        hashed = {(text_hash(q), text_hash(p)): (q, p) for q, p in pairs}
        found: dict[tuple[str, str], str] = {}
        keys = list(hashed)
        for i in range(0, len(keys), LOOKUP_CHUNK):
            chunk = keys[i:i + LOOKUP_CHUNK]
            where = " OR ".join(["(query_hash=? AND passage_hash=?)"] * len(chunk))
            params = [judge_id, fingerprint, *[h for key in chunk for h in key]]
            with self._lock:
                rows = self._db.execute(
                    f"SELECT query_hash, passage_hash, grade FROM judgments WHERE judge_id=? AND fingerprint=? AND ({where})",
                    params,
                ).fetchall()
            for qh, ph, grade in rows:
                found[hashed[(qh, ph)]] = grade
        return found

    def put_many(self, judge_id: str, fingerprint: str, rows: Iterable[tuple[str, str, str]], usage: Usage | None = None) -> None:
        """Store ``(query, passage, grade)`` rows and add ``usage`` to the judge's totals, atomically."""
        now = time.time()
        values = [(judge_id, fingerprint, text_hash(q), text_hash(p), g, now) for q, p, g in rows]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?, ?, ?)", values)
            if usage is not None:
                self._add_usage(judge_id, usage)

    def add_usage(self, judge_id: str, usage: Usage) -> None:
        """Add ``usage`` to the judge's totals now (one transaction); safe from any thread."""
        with self._lock, self._db:
            self._add_usage(judge_id, usage)

    def _add_usage(self, judge_id: str, usage: Usage) -> None:
        values = [getattr(usage, c) for c in USAGE_COLUMNS]
        updates = ", ".join(f"{c}={c}+excluded.{c}" for c in USAGE_COLUMNS)
        self._db.execute(
            f"INSERT INTO usage (judge_id, {', '.join(USAGE_COLUMNS)}) VALUES (?{', ?' * len(USAGE_COLUMNS)}) "
            f"ON CONFLICT(judge_id) DO UPDATE SET {updates}",
            (judge_id, *values),
        )

    def count(self, judge_id: str | None = None) -> int:
        with self._lock:
            if judge_id is None:
                return self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
            return self._db.execute("SELECT COUNT(*) FROM judgments WHERE judge_id=?", (judge_id,)).fetchone()[0]

    def usage(self, judge_id: str) -> Usage:
        """The judge's totals over every run that used this cache (killed and resumed ones included)."""
        with self._lock:
            row = self._db.execute(f"SELECT {', '.join(USAGE_COLUMNS)} FROM usage WHERE judge_id=?", (judge_id,)).fetchone()
        return Usage(**dict(zip(USAGE_COLUMNS, row))) if row else Usage()
