"""Load ONE side of a model: the document encoder for indexing, the query encoder for serving.

A CARE folder (a sentence-transformers folder whose first module is a ``Router`` with ``query`` and
``document`` routes) holds both towers; indexing needs only the (large) document tower and serving
only the (small) query tower, so :func:`load_side` builds a ``SentenceTransformer`` from the modules
of the requested route alone — the other tower's weights are never read from disk. A folder whose
``care_encoder.yaml`` pairs a query spec with a document spec (a student and its teacher, from
``care train student``) loads the requested entry alone. Any other spec
(plain Hugging Face folder, symmetric sentence-transformers folder, ``e5``, ``openai:...``,
``asym:Q|D``) goes through :func:`care.encoders.registry.load_model` unchanged.

The returned object is an :class:`~care.encoders.base.Encoder`; for a route-only model it is an
:class:`~care.encoders.hf.HFEncoder` whose ``settings`` name the route (so its fingerprint differs
from the full model's), and :func:`model_identity` gives a location-independent identity of the
folder, which the index manifest records and the service compares at start-up.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Literal

from care.encoders.base import Encoder
from care.encoders.fingerprint import digest
from care.errors import CareError

logger = logging.getLogger(__name__)

Side = Literal["query", "document"]
SIDES: tuple[str, ...] = ("query", "document")
ROUTER_CLASS_SUFFIX = ".Router"
ST_CONFIG_FILE = "config_sentence_transformers.json"


def _router_entry(folder: Path) -> dict[str, Any] | None:
    """The ``modules.json`` entry of a Router module, or None when the folder has no router."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CareError(f"{modules_file}: malformed JSON ({exc.msg} at line {exc.lineno}); re-save the model") from None
    for entry in modules:
        if str(entry.get("type", "")).endswith(ROUTER_CLASS_SUFFIX):
            return entry
    return None


def is_routed_folder(spec: str) -> bool:
    """True when ``spec`` is a local sentence-transformers folder with a query/document Router."""
    folder = Path(spec).expanduser()
    return folder.is_dir() and _router_entry(folder) is not None


def load_route(folder: str | Path, route: Side, *, device: str | None = None, dtype: str = "auto") -> Any:
    """Build a ``SentenceTransformer`` from the modules of one route of a routed folder.

    Args:
        folder: a folder saved by ``care.models.save_care_model`` (or any ST folder with a Router).
        route: ``"query"`` or ``"document"``.
        device: torch device (None: first available).
        dtype: ``auto`` | ``float32`` | ``float16`` | ``bfloat16`` for the Transformer weights.
    Returns:
        ``SentenceTransformer(modules=route_modules, prompts=...)`` keeping the folder's prompts.
    Raises:
        CareError: no router, or the route is missing.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import import_module_class

    from care.encoders.hf import resolve_device, resolve_dtype

    folder = Path(folder).expanduser()
    entry = _router_entry(folder)
    if entry is None:
        raise CareError(f"{folder}: not a routed model (no Router in modules.json); load it with load_model instead")
    router_dir = folder / entry.get("path", "")
    config_file = router_dir / "router_config.json"
    if not config_file.is_file():
        raise CareError(f"{config_file} is missing: the model folder is incomplete — re-save it")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    structure = config.get("structure", {})
    if route not in structure:
        raise CareError(f"{folder}: the router has routes {sorted(structure)}, not '{route}'")
    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)  # type: ignore[arg-type]
    modules = []
    for module_id in structure[route]:
        module_class = import_module_class(config["types"][module_id], model_name_or_path=str(router_dir))
        kwargs: dict[str, Any] = {}
        if module_class.__name__ == "Transformer":
            kwargs["model_kwargs"] = {"dtype": torch_dtype}
        try:
            module = module_class.load(str(router_dir), subfolder=module_id, **kwargs)
        except TypeError:
            module = module_class.load(str(router_dir / module_id))
        modules.append(module)
    prompts, default_prompt = _read_prompts(folder)
    model = SentenceTransformer(modules=modules, device=device, prompts=prompts, default_prompt_name=default_prompt)
    if torch_dtype != torch.float32:
        model.to(torch_dtype)
    logger.info("loaded the %s route of %s (%d modules) on %s", route, folder, len(modules), device)
    return model


def _read_prompts(folder: Path) -> tuple[dict[str, str], str | None]:
    file = folder / ST_CONFIG_FILE
    if not file.is_file():
        return {}, None
    data = json.loads(file.read_text(encoding="utf-8"))
    return dict(data.get("prompts") or {}), data.get("default_prompt_name")


def model_identity(spec: str) -> str:
    """A location-independent identity of a model: file names and sizes of a local folder, else the spec.

    Copying a model folder to the serving machine keeps its identity (paths and mtimes are left
    out); re-training changes weight sizes only rarely, so the service treats a mismatch as a
    warning, while a dimension mismatch is an error.
    """
    folder = Path(spec.split("?", 1)[0]).expanduser()
    if not folder.is_dir():
        return digest({"spec": spec})
    files = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                path = Path(dirpath) / name
                files.append((path.relative_to(folder).as_posix(), path.stat().st_size))
    return digest({"files": files})


def _load_spec_folder_side(spec_file: Path, side: Side, *, device: str | None, batch_size: int | None,
                           dtype: str) -> Encoder:
    """One side of a folder whose ``care_encoder.yaml`` pairs two specs (a student and its teacher)."""
    from care.encoders.registry import load_model, load_sub_spec, read_spec_file, sub_spec

    fields = read_spec_file(spec_file)
    if side not in fields:  # not a pair: the whole model encodes both sides
        return _dense(load_model(str(spec_file.parent), device=device, batch_size=batch_size), str(spec_file.parent))
    entry = sub_spec(fields[side], spec_file.parent)
    if isinstance(entry, str):
        return load_side(entry, side, device=device, batch_size=batch_size, dtype=dtype)
    model = load_sub_spec(entry, spec_file.parent, device=device, batch_size=batch_size, source=f"{spec_file}: {side}")
    return _dense(model, f"{spec_file}: {side}")


def _dense(model: Any, spec: str) -> Encoder:
    if not isinstance(model, Encoder):
        raise CareError(f"model '{spec}' is lexical ({model.name}); this command needs a dense encoder (e5, a model "
                        "folder, asym:Q|D ...): BM25 has no vectors to index, serve or export")
    return model


def _static_side(folder: str, side: Side, options: dict[str, str], *, batch_size: int | None,
                 spec: str) -> Encoder | None:
    """The lookup (:class:`care.encoders.static.StaticQueryEncoder`, no torch) for a side that is a static tower: the
    query route of a CARE folder whose query tower is static, or either side of a static sentence-transformers
    folder; None otherwise."""
    from care.encoders.static import StaticSpecOptions, find_static_module, load_static_spec

    location = find_static_module(folder)
    if location is None or (side == "document" and location.query_only):
        return None
    accepted = set(StaticSpecOptions().to_dict())
    unsupported = sorted(set(options) - accepted)
    if unsupported:
        raise CareError(f"model spec '{spec}': option(s) {', '.join(unsupported)} do not apply to a static tower; it "
                        f"accepts {', '.join(sorted(accepted))}")
    fields = {**options, **({"batch_size": batch_size} if batch_size else {})}
    fields.setdefault("name", f"{Path(folder).name}[{side}]")
    return load_static_spec(folder, fields, source=spec)


#: Spec options (``FOLDER?key=value``) that apply to one route of a saved routed folder.
ROUTE_OPTIONS: frozenset[str] = frozenset({"query_prefix", "document_prefix", "instruction_template", "dim",
                                           "max_length", "batch_size", "name", "instructions"})


def load_side(
    spec: str,
    side: Side,
    *,
    device: str | None = None,
    batch_size: int | None = None,
    dtype: str = "auto",
) -> Encoder:
    """Load what encodes ``side`` for ``spec``: one route of a routed folder, else the whole model.

    Raises:
        CareError: unknown side, a lexical model (BM25 has no vectors to index), or a load error.
    """
    if side not in SIDES:
        raise CareError(f"side must be one of {SIDES}, got {side!r}")
    from care.encoders.registry import spec_file_in_folder, split_options

    folder, options = split_options(spec)
    spec_file = spec_file_in_folder(folder)
    if spec_file is not None:
        return _load_spec_folder_side(spec_file, side, device=device, batch_size=batch_size, dtype=dtype)
    static = _static_side(folder, side, options, batch_size=batch_size, spec=spec)
    if static is not None:
        return static
    if is_routed_folder(folder):
        from care.encoders.hf import (
            DEFAULT_BATCH_SIZE,
            ROUTE_SETTING,
            HFEncoder,
            HFEncoderConfig,
            encoding_settings,
            resolve_device,
            resolve_dtype,
        )
        from care.encoders.model_location import locate_model
        from care.encoders.stored_prompts import stored_prompt_options

        unsupported = sorted(set(options) - ROUTE_OPTIONS)
        if unsupported:
            raise CareError(f"model spec '{spec}': option(s) {', '.join(unsupported)} cannot change a saved routed "
                            f"folder; it accepts {', '.join(sorted(ROUTE_OPTIONS))}")
        model = load_route(folder, side, device=device, dtype=dtype)
        options = {**stored_prompt_options(folder), **options}  # the prefixes it was trained with, unless overridden
        config = HFEncoderConfig.from_dict({"model": folder, "dtype": dtype, "device": device,
                                            "batch_size": batch_size or DEFAULT_BATCH_SIZE,
                                            "name": f"{Path(folder).name}[{side}]", **options}, source=spec)
        if config.max_length is not None:
            model.max_seq_length = config.max_length
        # as HFEncoder.from_config names a whole model's settings, so that the route's role fingerprint (the cache
        # key of its vectors) equals the whole model's for that role; ROUTE_SETTING keeps the two models apart
        settings = {"format": "sentence-transformers", "append_eos": bool(config.append_eos), "eos_added": False,
                    ROUTE_SETTING: side, **encoding_settings(config, resolve_dtype(dtype, resolve_device(device)))}
        return HFEncoder(config, model, locate_model(folder), settings)
    from care.encoders.registry import load_model

    return _dense(load_model(spec, device=device, batch_size=batch_size), spec)
