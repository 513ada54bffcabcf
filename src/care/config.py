"""One config base for every settings dataclass: from dict, to dict, ``KEY=VALUE`` overrides, save.

A config is a dataclass that also subclasses :class:`Config`::

    @dataclass
    class StudentConfig(Config):
        layers: int = 6
        lr: float = 2e-4

    StudentConfig.from_dict({"layers": 4})                 # typed, unknown keys refused
    StudentConfig.load("configs/student/e5.yaml", ["lr=1e-4"])
    config.with_overrides(["finetune.epochs=3"]).save("run/student.yaml")

:func:`build` is the one conversion engine behind it (also used directly for dataclasses that are not
configs, such as model-spec options): each value is checked against the field's annotation —
``int``, ``float``, ``bool``, ``str``, ``Path``, ``Literal[...]``, ``X | None``, ``list[X]``,
``tuple[X, ...]``, ``dict[K, V]``, a nested dataclass — and an error names the field by its dotted
path and the file or spec it came from (``configs/x.yaml: config field 'optim.lr': expected a number,
got 'fast'``). ``strings=True`` also converts text (``"512"``, ``"true"``) for values that arrive as
strings, such as the options of a model spec (``PATH?max_length=512``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

from care.errors import CareError

T = TypeVar("T")
C = TypeVar("C", bound="Config")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_NULL = frozenset({"none", "null"})
_YAML_SUFFIXES = (".yaml", ".yml")


class ConfigError(CareError):
    """A configuration value that cannot be used; the message names the field (and the file).

    Attributes:
        field / problem: the dotted field and what is wrong with it, when one field is to blame.
    """

    field: str | None = None
    problem: str | None = None


def _where(source: str | None) -> str:
    return f"{source}: " if source else ""


def _field_error(name: str, problem: str, source: str | None, noun: str) -> ConfigError:
    label = "config field" if noun == "field" else noun
    error = ConfigError(f"{_where(source)}{label} '{name}': {problem}")
    error.field, error.problem = name, problem
    return error


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


def _parse(value: Any, convert: Callable[[str], Any]) -> Any:
    """``convert(value)`` for a text value that converts, else ``None``."""
    if not isinstance(value, str):
        return None
    try:
        return convert(value)
    except ValueError:
        return None


def _scalar(value: Any, hint: Any, name: str, source: str | None, strings: bool, noun: str) -> Any:
    """``value`` as ``hint`` (bool / int / float / str / Path), or an error naming ``name``."""
    if hint is bool:
        if isinstance(value, bool):
            return value
        if strings and isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _field_error(name, f"expected true/false, got {value!r}", source, noun)
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        parsed = _parse(value, int) if strings else None
        if parsed is None:
            raise _field_error(name, f"expected an integer, got {value!r}", source, noun)
        return parsed
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        parsed = _parse(value, float)  # YAML reads "1e-4" as a string
        if parsed is None:
            raise _field_error(name, f"expected a number, got {value!r}", source, noun)
        return parsed
    if hint is str:
        if isinstance(value, str):
            return value
        if strings and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise _field_error(name, f"expected a string, got {value!r}", source, noun)
    if hint is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise _field_error(name, f"expected a path, got {value!r}", source, noun)
    return value


def coerce(value: Any, hint: Any, name: str, *, source: str | None = None, strings: bool = False,
           noun: str = "field") -> Any:
    """Convert one value to the annotated type (see the module docstring); ``name`` is its dotted path."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any or hint is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and (value is None or (strings and isinstance(value, str) and value.lower() in _NULL)):
            return None
        options = [a for a in args if a is not type(None)]
        errors: list[ConfigError] = []
        for option in options:
            try:
                return coerce(value, option, name, source=source, strings=strings, noun=noun)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is typing.Literal:
        if value in args:
            return value
        raise _field_error(name, f"must be one of {', '.join(map(str, args))}; got {value!r}", source, noun)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if dataclasses.is_dataclass(value) and isinstance(value, hint):
            return value
        return build(hint, value, source=source, strings=strings, prefix=f"{name}.", noun=noun)
    if origin in (list, tuple, Sequence):
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            raise _field_error(name, f"expected a list, got {type(value).__name__}", source, noun)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):  # fixed length
            items = [coerce(v, a, f"{name}[{i}]", source=source, strings=strings, noun=noun)
                     for i, (v, a) in enumerate(zip(value, args))]
            if len(items) != len(args):
                raise _field_error(name, f"expected {len(args)} items, got {len(value)}", source, noun)
            return tuple(items)
        item = args[0] if args else Any
        items = [coerce(v, item, f"{name}[{i}]", source=source, strings=strings, noun=noun) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _field_error(name, f"expected a mapping, got {type(value).__name__}", source, noun)
        key_hint, value_hint = args if args else (Any, Any)
        return {coerce(k, key_hint, f"{name}", source=source, strings=strings, noun=noun):
                coerce(v, value_hint, f"{name}.{k}", source=source, strings=strings, noun=noun) for k, v in value.items()}
    return _scalar(value, hint, name, source, strings, noun)


def build(cls: type[T], data: Any, *, source: str | None = None, strings: bool = False, prefix: str = "",
          noun: str = "field", hint: str = "") -> T:
    """``cls(**data)`` with every value converted to its field's type (the one conversion engine).

    Args:
        cls: a dataclass type.
        data: a mapping of field values (from YAML / JSON, or spec options).
        source: where ``data`` came from (a file, a spec), quoted at the start of every error.
        strings: also convert text to the field's type (``"512"`` -> 512, ``"true"`` -> True).
        prefix: dotted path of ``cls`` inside an enclosing config (``"optim."``).
        noun: what a key is called in errors: ``"field"`` (a config) or ``"option"`` (a model spec).
        hint: appended to the "missing field" error (e.g. how to rebuild a damaged folder).
    Raises:
        ConfigError: not a mapping, an unknown key (the valid ones are listed), a missing required
            field, or a value of the wrong type — each naming the field.
    """
    where = prefix.rstrip(".") or "<root>"
    if not isinstance(data, Mapping):
        raise _field_error(where, f"expected a mapping, got {type(data).__name__}", source, noun)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        named = ", ".join(f"'{prefix}{key}'" for key in unknown)
        raise ConfigError(f"{_where(source)}unknown {noun}{'s' if len(unknown) > 1 else ''} {named}; valid {noun}s are: "
                          f"{', '.join(sorted(fields))}")
    missing = [n for n, f in fields.items() if n not in data and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{_where(source)}incomplete {cls.__name__}: missing {noun}(s) "
                          f"{', '.join(prefix + m for m in missing)}{'; ' + hint if hint else ''}")
    hints = typing.get_type_hints(cls)
    values = {key: coerce(value, hints[key], f"{prefix}{key}", source=source, strings=strings, noun=noun)
              for key, value in data.items()}
    try:
        return cls(**values)
    except ConfigError as exc:
        if exc.field is not None and prefix:  # the dataclass's own check of one of its fields: name it in full
            raise _field_error(f"{prefix}{exc.field}", exc.problem or str(exc), source, noun) from None
        raise
    except CareError as exc:
        raise ConfigError(f"{_where(source)}{exc}") from None


def plain(value: Any) -> Any:
    """``value`` with tuples turned into lists and paths into strings, recursively (for JSON / YAML)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def check_field_types(cls: type, data: Mapping[str, Any], source: str) -> None:
    """Refuse values whose type does not fit the dataclass field (through :func:`coerce`), for loaders that
    build the dataclass themselves; the error reads ``"{source}, field 'timeout_s': expected a number, got '60s'"``.

    Raises:
        CareError: the first value of the wrong type.
    """
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        if name in hints:
            try:
                coerce(value, hints[name], name)
            except ConfigError as exc:
                raise CareError(f"{source}, field '{exc.field or name}': {exc.problem or exc} "
                                f"({type(value).__name__})") from None


def read_config_file(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """The mapping in a YAML / JSON file; :class:`ConfigError` for a missing file, bad syntax or a non-mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML/JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"a.b.c=value"`` -> ``(["a", "b", "c"], value)`` with the value parsed as YAML (``2e-5``, ``null``, ``[1,2]``)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. optim.lr=2e-5")
    key, raw = item.split("=", 1)
    return key.strip().split("."), parse_value(raw, f"override {item!r}")


def parse_value(raw: str, what: str) -> Any:
    """A ``KEY=VALUE`` item's value read as YAML (``2e-5``, ``null``, ``[1,2]``; empty -> ``""``); ``what`` names the
    item in the error."""
    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what}: the value is not valid YAML ({exc})") from None


def set_dotted(data: dict[str, Any], parts: Sequence[str], value: Any, item: str) -> None:
    """Set ``data[parts[0]]...[parts[-1]] = value`` in place, creating missing sections; ``item`` names the setting
    in the error when a part above the last is not a section."""
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = {}
            node[part] = child
        if not isinstance(child, dict):
            raise ConfigError(f"override {item!r}: '{part}' is not a section")
        node = child
    node[parts[-1]] = value


#: One change to a config dict: a user's ``"a.b.c=value"`` text, or a typed ``("a.b.c", value)`` pair (what a
#: command's typed flag sets: no string round trip).
Override = str | tuple[str, Any]


def override_parts(item: Override) -> tuple[list[str], Any]:
    """``(dotted key split, value)`` of an :data:`Override`: text is parsed (:func:`parse_override`), a pair is typed."""
    if isinstance(item, tuple):
        key, value = item
        return key.split("."), value
    return parse_override(item)


def describe_override(item: Override) -> str:
    """How an override is named in a message: the user's text as given, a typed pair by its key and value."""
    return item if isinstance(item, str) else f"{item[0]} (set to {item[1]!r})"


def apply_overrides(data: dict[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """A copy of ``data`` with each override applied in order (``"a.b.c=value"`` text or ``("a.b.c", value)``
    pairs; missing sections are created)."""
    data = copy.deepcopy(data)
    for item in overrides:
        parts, value = override_parts(item)
        set_dotted(data, parts, value, describe_override(item))
    return data


class Config:
    """Base of every config dataclass: dict / YAML / JSON round trip, overrides, validation, save.

    Subclasses are dataclasses; they may override :meth:`validate` (called by :meth:`from_dict`
    after the values are typed) to check values across fields, raising :class:`ConfigError` that
    names the field.
    """

    #: Convert text values to the field types (``"512"`` -> 512): set for configs read from model-spec options.
    PARSE_STRINGS: ClassVar[bool] = False
    #: What a key is called in error messages (``"option"`` for model-spec options).
    KEY_NOUN: ClassVar[str] = "field"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON / YAML ready: tuples become lists, paths strings)."""
        return plain(dataclasses.asdict(self))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any], *, source: str | None = None) -> C:
        """Build, type-check and validate from a nested mapping (unknown keys are refused, naming them)."""
        config = build(cls, data, source=source, strings=cls.PARSE_STRINGS, noun=cls.KEY_NOUN)
        try:
            config.validate()
        except ConfigError as exc:
            if source and not str(exc).startswith(f"{source}:"):
                raise ConfigError(f"{source}: {exc}") from None
            raise
        return config

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad field (nothing to check by default)."""

    @classmethod
    def load(cls: type[C], path: str | Path, overrides: Sequence[str] = ()) -> C:
        """Read a YAML / JSON file, apply ``KEY=VALUE`` overrides, build; errors name the file."""
        return cls.from_dict(apply_overrides(read_config_file(path), overrides), source=str(path))

    def with_overrides(self: C, overrides: Sequence[str], *, source: str | None = None) -> C:
        """A copy with ``KEY=VALUE`` overrides applied (``optim.lr=2e-5``), validated."""
        if not overrides:
            return self
        return type(self).from_dict(apply_overrides(self.to_dict(), overrides), source=source or "overrides")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def save(self, path: str | Path) -> Path:
        """Write atomically as YAML (``.yaml`` / ``.yml``) or JSON (anything else); returns the path."""
        from care.data.io import atomic_write

        path = Path(path)
        text = self.to_yaml() if path.suffix in _YAML_SUFFIXES else self.to_json() + "\n"
        with atomic_write(path) as fh:
            fh.write(text)
        return path
