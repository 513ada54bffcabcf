"""Building a config dataclass from a plain dict (JSON / YAML) with errors that name what is wrong."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from care.errors import CareError

T = TypeVar("T")


def dataclass_from_dict(cls: type[T], data: dict[str, Any], source: str, *, hint: str = "") -> T:
    """``cls(**data)``, refusing unknown fields and reporting missing ones.

    Args:
        cls: a dataclass type.
        data: field values (already typed).
        source: what the dict came from (a file name, "model shape", ...), quoted in errors.
        hint: appended to the "incomplete" error, e.g. how to rebuild a damaged folder.
    Raises:
        CareError: ``"{source}: unknown field(s) [...]; known: [...]"`` or
        ``"{source}: incomplete {cls} (...)"``.
    """
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - known
    if unknown:
        raise CareError(f"{source}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise CareError(f"{source}: incomplete {cls.__name__} ({exc}){'; ' + hint if hint else ''}") from None
