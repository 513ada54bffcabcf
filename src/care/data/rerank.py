"""Rerank JSONL files (MTEB reranking shape): ``{"query": str, "positive": [str, ...], "negative": [str, ...]}``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import require_text, require_text_list
from care.data.io import iter_jsonl, write_jsonl


@dataclass(frozen=True)
class RerankExample:
    """One query with its labelled candidates (positives first when scored)."""

    query: str
    positive: tuple[str, ...]
    negative: tuple[str, ...]


def parse_rerank_row(obj: dict[str, Any], path: Path, line: int) -> RerankExample:
    """One rerank row: a query and at least one positive (named by file, line and field when bad)."""
    query = require_text(obj, "query", path, line)
    pos = require_text_list(obj, "positive", path, line, allow_empty=False)
    neg = require_text_list(obj, "negative", path, line, allow_empty=True)
    return RerankExample(query, tuple(pos), tuple(neg))


def load_rerank(path: str | Path) -> list[RerankExample]:
    """Load a rerank JSONL file; every row needs a query and at least one positive."""
    path = Path(path)
    rows = [parse_rerank_row(obj, path, line) for line, obj in iter_jsonl(path)]
    if not rows:
        raise DataFormatError(path, "no rerank examples", hint="add {\"query\", \"positive\", \"negative\"} lines")
    return rows


def write_rerank(path: str | Path, rows: Iterable[RerankExample]) -> int:
    """Atomically write rerank examples."""
    return write_jsonl(path, ({"query": r.query, "positive": list(r.positive), "negative": list(r.negative)} for r in rows))
