"""Build encoder config dataclasses from spec options (strings) or spec-file fields (YAML/JSON values).

``path?pooling=cls&max_length=512`` gives ``{"pooling": "cls", "max_length": "512"}``; the values
are converted to the dataclass field's type here, and an unknown or malformed option is a
:class:`~care.errors.CareError` that lists the accepted ones.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from care.errors import CareError

ConfigT = TypeVar("ConfigT")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(value: Any, annotation: Any, *, key: str, source: str) -> Any:
    """Convert ``value`` to ``annotation`` (str / int / float / bool / Literal / Optional of those)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in {"none", "null"}):
            return None
        errors = []
        for arg in args:
            try:
                return _coerce(value, arg, key=key, source=source)
            except CareError as exc:
                errors.append(str(exc))
        raise CareError(errors[0] if errors else f"{source}: bad value {value!r} for option '{key}'")
    if origin is typing.Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed:
            raise CareError(f"{source}: option '{key}' must be one of {', '.join(map(str, allowed))}; got {value!r}")
        return value
    try:
        if annotation is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(value)
        if annotation is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if annotation is float:
            return float(value)
        if annotation is str:
            return str(value)
    except ValueError:
        raise CareError(f"{source}: option '{key}' expects {annotation.__name__}; got {value!r}") from None
    return value


def config_from_options(cls: type[ConfigT], options: Mapping[str, Any], *, source: str) -> ConfigT:
    """Instantiate dataclass ``cls`` from ``options``, converting each value to its field's type.

    Args:
        cls: a dataclass type (e.g. :class:`care.encoders.hf.HFEncoderConfig`).
        options: field name -> value (strings from a spec, or typed values from YAML/JSON).
        source: where the options came from, used in error messages (the spec or file name).
    Raises:
        CareError: an unknown option (the message lists the valid ones), a missing required field,
            or a value that does not convert.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise CareError(
            f"{source}: unknown option(s) {', '.join(unknown)}; valid options are: {', '.join(sorted(fields))}"
        )
    missing = [
        name
        for name, f in fields.items()
        if name not in options and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise CareError(f"{source}: missing required option(s) {', '.join(missing)}")
    values = {key: _coerce(value, hints[key], key=key, source=source) for key, value in options.items()}
    return cls(**values)
