"""STS JSONL files: ``{"sentence1": str, "sentence2": str, "score": number}``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import require_number, require_text
from care.data.io import iter_jsonl, write_jsonl


@dataclass(frozen=True)
class STSPair:
    """Two sentences and a gold similarity score."""

    sentence1: str
    sentence2: str
    score: float


def parse_sts_row(obj: dict[str, Any], path: Path, line: int) -> STSPair:
    """One STS row: two sentences and a numeric score."""
    return STSPair(require_text(obj, "sentence1", path, line), require_text(obj, "sentence2", path, line),
                   require_number(obj, "score", path, line))


def load_sts(path: str | Path) -> list[STSPair]:
    """Load an STS JSONL file of scored sentence pairs."""
    path = Path(path)
    rows = [parse_sts_row(obj, path, line) for line, obj in iter_jsonl(path)]
    if len(rows) < 2:
        raise DataFormatError(path, "an STS file needs at least two scored pairs")
    return rows


def write_sts(path: str | Path, rows: Iterable[STSPair]) -> int:
    """Atomically write STS pairs."""
    return write_jsonl(path, ({"sentence1": r.sentence1, "sentence2": r.sentence2, "score": r.score} for r in rows))
