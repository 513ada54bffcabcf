"""Rerank (MTEB reranking shape) and STS JSONL files.

- rerank: ``{"query": str, "positive": [str, ...], "negative": [str, ...]}``
- STS: ``{"sentence1": str, "sentence2": str, "score": number}``
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import require_number, require_text, require_text_list
from care.data.io import iter_jsonl, write_jsonl


@dataclass(frozen=True)
class RerankExample:
    """One query with its labelled candidates (positives first when scored)."""

    query: str
    positive: tuple[str, ...]
    negative: tuple[str, ...]


@dataclass(frozen=True)
class STSPair:
    """Two sentences and a gold similarity score."""

    sentence1: str
    sentence2: str
    score: float


def parse_rerank_row(obj: dict[str, Any], path: Path, line: int) -> RerankExample:
    """One rerank row: a query and at least one positive (named by file, line and field when bad)."""
    query = require_text(obj, "query", path, line)
    pos = require_text_list(obj, "positive", path, line, allow_empty=False)
    neg = require_text_list(obj, "negative", path, line, allow_empty=True)
    return RerankExample(query, tuple(pos), tuple(neg))


def parse_sts_row(obj: dict[str, Any], path: Path, line: int) -> STSPair:
    """One STS row: two sentences and a numeric score."""
    return STSPair(require_text(obj, "sentence1", path, line), require_text(obj, "sentence2", path, line),
                   require_number(obj, "score", path, line))


def load_rerank(path: str | Path) -> list[RerankExample]:
    """Load a rerank JSONL file; every row needs a query and at least one positive."""
    path = Path(path)
    rows = [parse_rerank_row(obj, path, line) for line, obj in iter_jsonl(path)]
    if not rows:
        raise DataFormatError(path, "no rerank examples", hint="add {\"query\", \"positive\", \"negative\"} lines")
    return rows


def load_sts(path: str | Path) -> list[STSPair]:
    """Load an STS JSONL file of scored sentence pairs."""
    path = Path(path)
    rows = [parse_sts_row(obj, path, line) for line, obj in iter_jsonl(path)]
    if len(rows) < 2:
        raise DataFormatError(path, "an STS file needs at least two scored pairs")
    return rows


def write_rerank(path: str | Path, rows: Iterable[RerankExample]) -> int:
    """Atomically write rerank examples."""
    return write_jsonl(path, ({"query": r.query, "positive": list(r.positive), "negative": list(r.negative)} for r in rows))


def write_sts(path: str | Path, rows: Iterable[STSPair]) -> int:
    """Atomically write STS pairs."""
    return write_jsonl(path, ({"sentence1": r.sentence1, "sentence2": r.sentence2, "score": r.score} for r in rows))
