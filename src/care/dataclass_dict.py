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


_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a mapping",
               list: "a list", tuple: "a list", type(None): "null"}


def _fits(value: Any, annotation: Any) -> bool:
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(annotation))
    if annotation is Any:
        return True
    if annotation is type(None) or annotation is None:
        return value is None
    base = origin or annotation
    if base is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if base in (list, tuple):
        return isinstance(value, (list, tuple))
    if isinstance(base, type):
        return isinstance(value, base)
    return True  # an annotation this check does not understand is left to the dataclass


def _describe(annotation: Any) -> str:
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(annotation))
    return _TYPE_WORDS.get(origin or annotation, getattr(annotation, "__name__", str(annotation)))


def check_field_types(cls: type, data: dict[str, Any], source: str) -> None:
    """Refuse values whose JSON / YAML type does not fit the dataclass field's annotation.

    Args:
        cls: a dataclass type (annotations may be strings: ``from __future__ import annotations``).
        data: the values read from a file, before ``cls(**data)``.
        source: where they came from (file and entry), quoted in the error.
    Raises:
        CareError: ``"{source}, field 'passages_per_call': expected an integer, got 'five' (str)"``.
    """
    import typing

    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        annotation = hints.get(name)
        if annotation is not None and not _fits(value, annotation):
            raise CareError(f"{source}, field '{name}': expected {_describe(annotation)}, "
                            f"got {value!r} ({type(value).__name__})")
