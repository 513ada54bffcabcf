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


def file_identity(path: str | Path) -> dict[str, Any]:
    """Identify one weights file (e.g. a bundled quantised model) by resolved path, size and mtime."""
    resolved = Path(path).expanduser().resolve()
    stat = resolved.stat()
    return {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
