"""Field-level validation shared by every loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.text_rules import surrogate_at


def require_text(obj: dict[str, Any], key: str, path: Path, line: int) -> str:
    """Return ``obj[key]`` as a non-empty string, or raise naming the file, line and field."""
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
        if not isinstance(item, str) or not item.strip():
            raise DataFormatError(
                path, f"item {i} is not a non-empty string", line=line, field=key,
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
