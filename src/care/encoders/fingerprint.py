"""Stable fingerprints: what identifies an encoder's weights and its encoding settings.

The embedding cache keys on ``Encoder.fingerprint``, so two encoders with the same fingerprint
must produce the same vectors, and any change that can change a vector (other weights, another
pooling, instruction template, max length, prefix or output dimension) must change it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from care.hashes import file_sha256, hex_digest

#: Hex characters kept from the SHA-256 digest (64 bits: collisions are not a practical concern).
FINGERPRINT_LENGTH = 16


def digest(payload: Mapping[str, Any]) -> str:
    """Hash a JSON-serialisable mapping (keys sorted, so order does not matter) to a short hex string."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hex_digest(text, length=FINGERPRINT_LENGTH)


def folder_identity(folder: str | Path) -> dict[str, Any]:
    """Identify a local model folder by its resolved path and every file's relative path, size and mtime.

    Hidden files and folders (``.git``, ``.cache``) are skipped. Editing, replacing or re-saving any
    weight, config or tokenizer file changes the identity; copying the folder elsewhere also does
    (a cache miss, never a wrong hit).
    """
    root = Path(folder).expanduser().resolve()
    files: list[tuple[str, int, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            path = Path(dirpath) / filename
            stat = path.stat()
            files.append((path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns))
    return {"path": str(root), "files": files}


def folder_fingerprint(path: str | Path, **settings: object) -> str:
    """A short hex fingerprint of a model folder (:func:`folder_identity`: file names, sizes and
    modification times, never the weights' bytes) plus ``settings``; a path that is no folder (a hub
    name, a single file) is fingerprinted by its name (resolved when it exists)."""
    folder = Path(path)
    if folder.is_dir():
        identity = folder_identity(folder)
    else:
        identity = {"name": str(folder.resolve()) if folder.exists() else str(path)}
    return digest({**identity, "settings": settings})


def file_identity(path: str | Path) -> dict[str, Any]:
    """Identify one weights file (e.g. a bundled quantised model) by resolved path, size and mtime."""
    resolved = Path(path).expanduser().resolve()
    stat = resolved.stat()
    return {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


#: ``router_config.json`` of a sentence-transformers folder whose first module is a Router.
ROUTER_CONFIG = "router_config.json"
#: ``modules.json``: the module list of a sentence-transformers folder.
MODULES_FILE = "modules.json"
#: Files of a sentence-transformers folder that put modules together or describe the folder rather than
#: belong to a module (prompts and CARE's prefixes reach a fingerprint through the encoder's settings).
PIPELINE_FILES = frozenset({MODULES_FILE, ROUTER_CONFIG, "config_sentence_transformers.json", "README.md",
                            "care_prompts.json", "care_config.json"})
#: Per tokenizer file, the JSON keys that record the tokenizer's truncation / padding state when it was
#: saved (written once it has been called): transformers sets that state again on every call from the
#: arguments sentence-transformers passes (truncation, padding, maximum length) and the tokenizer's
#: sides, which the encoder's settings carry as loaded. So the same tokenizer saved before and after a
#: call gets one digest.
TOKENIZER_CALL_STATE: dict[str, frozenset[str]] = {
    "tokenizer_config.json": frozenset({"max_length", "stride", "truncation_strategy", "truncation_side",
                                        "pad_to_multiple_of", "pad_token_type_id", "padding_side"}),
    "tokenizer.json": frozenset({"truncation", "padding"}),
}


def _content_digest(path: Path) -> str:
    """A file's SHA-256; for a tokenizer file, of its JSON without the keys of :data:`TOKENIZER_CALL_STATE`."""
    call_state = TOKENIZER_CALL_STATE.get(path.name)
    if call_state is not None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            return digest({path.name: {key: value for key, value in data.items() if key not in call_state}})
    return file_sha256(path)


def _module_files(module_dir: Path, *, skip: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """``(relative path, content digest)`` of every file under ``module_dir``, sorted; hidden files and
    folders, and top-level entries named in ``skip``, are left out."""
    files = []
    for path in module_dir.rglob("*"):
        relative = path.relative_to(module_dir)
        if path.is_file() and relative.parts[0] not in skip and not any(p.startswith(".") for p in relative.parts):
            files.append((relative.as_posix(), _content_digest(path)))
    return sorted(files)


def role_content_identity(folder: str | Path, role: str) -> dict[str, Any] | None:
    """Identify the modules of a local sentence-transformers folder that serve ``role`` by *content*:
    each module's position, type and every file's digest — never the folder's path or the module
    folder's name — so the same tower gets the same identity wherever it lies: a routed folder's
    ``role`` route (a CARE model), and the one pipeline of a plain folder (it serves every role). A
    recipe stage that froze a document tower and saved its own copy therefore shares the document
    vectors cached for the folder it came from. ``None`` when ``folder`` is no such folder, or routed
    without a ``role`` route.

    Reads every byte of the modules' files: about a second per GB.
    """
    root = Path(folder).expanduser().resolve()
    router_file, modules_file = root / ROUTER_CONFIG, root / MODULES_FILE
    if router_file.is_file():
        config = json.loads(router_file.read_text(encoding="utf-8"))
        names = config.get("structure", {}).get(role)
        if not names:
            return None
        types = config.get("types", {})
        modules = [{"position": position, "type": types.get(name), "files": _module_files(root / name)}
                   for position, name in enumerate(names)]
    elif modules_file.is_file():
        entries = json.loads(modules_file.read_text(encoding="utf-8"))
        if not isinstance(entries, list):
            return None
        # a module stored at the root ("path": "") owns the root's files but not the pipeline's nor the
        # folders of the modules after it
        module_dirs = frozenset(str(entry.get("path", "")).split("/")[0] for entry in entries) - {""}
        modules = []
        for position, entry in enumerate(entries):
            path = str(entry.get("path", ""))
            files = (_module_files(root, skip=PIPELINE_FILES | module_dirs) if path in ("", ".")
                     else _module_files(root / path))
            modules.append({"position": position, "type": entry.get("type"), "files": files})
    else:
        return None
    return {"modules": modules}
