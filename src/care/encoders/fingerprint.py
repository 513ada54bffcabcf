"""Stable fingerprints: what identifies an encoder's weights and its encoding settings.

The embedding cache keys on ``Encoder.fingerprint``, so two encoders with the same fingerprint
must produce the same vectors, and any change that can change a vector (other weights, another
pooling, instruction template, max length, prefix or output dimension) must change it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Hex characters kept from the SHA-256 digest (64 bits: collisions are not a practical concern).
FINGERPRINT_LENGTH = 16


def digest(payload: Mapping[str, Any]) -> str:
    """Hash a JSON-serialisable mapping (keys sorted, so order does not matter) to a short hex string."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:FINGERPRINT_LENGTH]


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


#: Bytes read at a time when hashing a file's content.
_HASH_BLOCK = 1 << 20
#: ``router_config.json`` of a sentence-transformers folder whose first module is a Router.
ROUTER_CONFIG = "router_config.json"


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's content (read in 1 MiB blocks)."""
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_HASH_BLOCK), b""):
            sha.update(block)
    return sha.hexdigest()


def route_content_identity(folder: str | Path, route: str) -> dict[str, Any] | None:
    """Identify one route of a routed sentence-transformers folder (a CARE model) by *content*: each of
    the route's modules (its position, type and every file's SHA-256 — not the module folder's name,
    which carries the route), so two folders holding the same document tower — a recipe stage that froze it
    and saved its own copy — get the same identity wherever they are. ``None`` when ``folder`` has no
    ``router_config.json`` or no such route.

    Reads every byte of the route's files: about a second per GB.
    """
    root = Path(folder).expanduser().resolve()
    config_file = root / ROUTER_CONFIG
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text(encoding="utf-8"))
    names = config.get("structure", {}).get(route)
    if not names:
        return None
    modules = []
    for position, name in enumerate(names):
        module_dir = root / name
        files = sorted((p.relative_to(module_dir).as_posix(), file_sha256(p)) for p in module_dir.rglob("*")
                       if p.is_file() and not any(part.startswith(".") for part in p.relative_to(module_dir).parts))
        modules.append({"position": position, "type": config.get("types", {}).get(name), "files": files})
    return {"route": route, "modules": modules}
