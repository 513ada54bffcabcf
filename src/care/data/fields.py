"""Field-level validation shared by every loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.text_rules import has_visible, surrogate_at

#: The error for a document text that shows nothing (the rule of :func:`care.data.text_rules.has_visible`).
NO_VISIBLE_TEXT = "no visible text (empty, or only whitespace, zero-width or control characters)"


def require_text(obj: dict[str, Any], key: str, path: Path, line: int) -> str:
    """Return ``obj[key]`` as a non-empty string, or raise naming the file, line and field.

    Refused: a missing field, a non-string, an empty or whitespace-only text and a lone surrogate. A
    query-side text with only zero-width or control characters loads: the benchmark refuses it by name and
    scores the rest (:mod:`care.bench.query_check`); document texts use :func:`require_document_text`.
    """
    if key not in obj:
        raise DataFormatError(path, "missing field", line=line, field=key, hint=f"add a \"{key}\" string")
    value = obj[key]
    if not isinstance(value, str):
        raise DataFormatError(
            path, f"expected a string, got {type(value).__name__}", line=line, field=key,
        )
    if not value.strip():
        raise DataFormatError(
            path, "empty or whitespace-only text", line=line, field=key,
            hint="remove the row or give it real text",
        )
    reject_surrogate(value, path, line, key)
    return value


def require_document_text(obj: dict[str, Any], key: str, path: Path, line: int) -> str:
    """:func:`require_text` for a text that is searched (a corpus document, a rerank candidate, a training
    passage): it must show something, since every model encodes a text of only whitespace, zero-width or
    control characters as the empty text, which then scores alike against every query."""
    value = obj.get(key)
    if isinstance(value, str) and not has_visible(value):
        raise DataFormatError(path, NO_VISIBLE_TEXT, line=line, field=key, hint="remove the row or give it real text")
    return require_text(obj, key, path, line)


def reject_surrogate(value: str, path: Path, line: int | None, key: str) -> None:
    """Raise when ``value`` holds a lone UTF-16 surrogate (a JSON ``\\ud800`` escape without its pair):
    it is not a character, UTF-8 cannot encode it and every tokenizer fails on it."""
    at = surrogate_at(value)
    if at is not None:
        raise DataFormatError(
            path, f"lone surrogate U+{ord(value[at]):04X} at character {at} is not a Unicode character",
            line=line, field=key, hint="fix the \\uD800-\\uDFFF escape: it must be one half of a surrogate pair",
        )


def require_id(obj: dict[str, Any], key: str, path: Path, line: int) -> str:
    """Return an id field as a string (ints are accepted and converted)."""
    if key not in obj:
        raise DataFormatError(path, "missing field", line=line, field=key, hint=f"add a unique \"{key}\"")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataFormatError(path, f"id must be a string, got {type(value).__name__}", line=line, field=key)
    value = str(value)
    if not value.strip():
        raise DataFormatError(path, "empty id", line=line, field=key)
    return value


def require_text_list(obj: dict[str, Any], key: str, path: Path, line: int | None, *, allow_empty: bool) -> list[str]:
    """Return ``obj[key]`` as a list of non-empty strings (a single string becomes a one-item list)."""
    if key not in obj:
        if allow_empty:
            return []
        raise DataFormatError(path, "missing field", line=line, field=key, hint=f"add a \"{key}\" list of texts")
    value = obj[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise DataFormatError(path, f"expected a list of strings, got {type(value).__name__}", line=line, field=key)
    if not value and not allow_empty:
        raise DataFormatError(path, "empty list", line=line, field=key, hint="give at least one text")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not has_visible(item):
            raise DataFormatError(
                path, f"item {i} is not a string with visible text", line=line, field=key,
                hint="remove empty entries",
            )
        reject_surrogate(item, path, line, f"{key}[{i}]")
    return list(value)


def require_number(obj: dict[str, Any], key: str, path: Path, line: int) -> float:
    """Return ``obj[key]`` as a float (a finite JSON number)."""
    if key not in obj:
        raise DataFormatError(path, "missing field", line=line, field=key, hint=f"add a numeric \"{key}\"")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise DataFormatError(path, f"expected a number, got {value!r}", line=line, field=key)
    return float(value)
