"""A persistent SQLite cache of every judgment, keyed by (judge id, judge fingerprint, query, passage).

Texts are stored as SHA-256 digests. Grades of one call are committed together with the call's
token / cost usage in one transaction, so a crash loses at most the calls in flight and a rerun or
a resumed run never pays for a finished pair again. Use one :class:`JudgmentCache` per thread (the
runner writes from its main thread only).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from care.curate.judges.base import Usage

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


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JudgmentCache:
    """``get_many`` / ``put_many`` of grades; ``usage`` totals per judge across runs."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
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
            rows = self._db.execute(
                f"SELECT query_hash, passage_hash, grade FROM judgments WHERE judge_id=? AND fingerprint=? AND ({where})",
                params,
            )
            for qh, ph, grade in rows:
                found[hashed[(qh, ph)]] = grade
        return found

    def put_many(self, judge_id: str, fingerprint: str, rows: Iterable[tuple[str, str, str]], usage: Usage | None = None) -> None:
        """Store ``(query, passage, grade)`` rows and add ``usage`` to the judge's totals, atomically."""
        now = time.time()
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?, ?, ?)",
                [(judge_id, fingerprint, text_hash(q), text_hash(p), g, now) for q, p, g in rows],
            )
            if usage is not None:
                self._db.execute(
                    "INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(judge_id) DO UPDATE SET "
                    "calls=calls+excluded.calls, retries=retries+excluded.retries, reasks=reasks+excluded.reasks, "
                    "prompt_tokens=prompt_tokens+excluded.prompt_tokens, "
                    "completion_tokens=completion_tokens+excluded.completion_tokens, cost_usd=cost_usd+excluded.cost_usd",
                    (judge_id, usage.calls, usage.retries, usage.reasks, usage.prompt_tokens, usage.completion_tokens,
                     usage.cost_usd),
                )

    def count(self, judge_id: str | None = None) -> int:
        if judge_id is None:
            return self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM judgments WHERE judge_id=?", (judge_id,)).fetchone()[0]

    def usage(self, judge_id: str) -> Usage:
        row = self._db.execute(
            "SELECT calls, retries, reasks, prompt_tokens, completion_tokens, cost_usd FROM usage WHERE judge_id=?",
            (judge_id,),
        ).fetchone()
        return Usage(*row) if row else Usage()
