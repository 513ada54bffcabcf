"""Checksums of the files an index build writes, and their verification before an index is served.

``care index build`` records, in ``manifest.json``'s ``files`` map, the size and SHA-256 of every file its
merge step leaves in the index folder (``plan.json``, ``docstore.sqlite``, every file under ``index/``;
not ``manifest.json`` itself, not the shards, which carry their own checksums in their records, and not a
milvus-lite database, which Milvus itself rewrites). :func:`verify_files` checks them when the index is
opened, at one of three levels (:data:`VERIFY_MODES`, ``care serve --verify``):

* ``full`` (default): every recorded file's size and SHA-256 (streamed: :func:`~care.hashes.file_sha256`);
* ``quick``: sizes only;
* ``off``: nothing.

``full`` and ``quick`` also run the content checks of :mod:`care.index.bundle` (SQLite's ``quick_check``, the
stored vectors' norms). A mismatch raises :class:`IndexDamagedError` naming the file, what the manifest
recorded, what was found and how to rebuild.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.errors import CareError
from care.hashes import file_sha256

logger = logging.getLogger(__name__)

FULL, QUICK, OFF = "full", "quick", "off"
#: ``care serve --verify`` levels, most thorough first.
VERIFY_MODES = (FULL, QUICK, OFF)
#: Full hashing costs about 0.7 s per GiB on the project's 2-core machine (docs/serve.md): cheap enough to be
#: the default.
DEFAULT_VERIFY = FULL


class IndexDamagedError(CareError):
    """A file of an index folder differs from what its build recorded, or its content fails a check."""


def check_verify_mode(mode: str) -> str:
    """``mode`` when it is one of :data:`VERIFY_MODES`; else a CareError naming the option."""
    if mode not in VERIFY_MODES:
        raise CareError(f"--verify {mode!r}: choose one of {', '.join(VERIFY_MODES)}")
    return mode


def rebuild_hint(folder: str | Path) -> str:
    """How to rebuild a damaged index folder (the shards, when intact, are merged again without encoding)."""
    return (f"rebuild it with 'care index build --merge --output {folder}' (merges the encoded shards again; needs "
            "intact plan.json and shards), or 'care index build --model MODEL --corpus CORPUS --output NEW_DIR' from "
            "scratch")


@dataclass(frozen=True)
class FileChecksum:
    """What the build recorded of one file: its SHA-256 (hex) and its size in bytes."""

    sha256: str
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "bytes": self.bytes}

    @classmethod
    def of(cls, path: Path) -> FileChecksum:
        """The checksum of the file at ``path`` as it is now (one streamed read)."""
        return cls(sha256=file_sha256(path), bytes=path.stat().st_size)

    @classmethod
    def from_dict(cls, data: Any, source: str) -> FileChecksum:
        """Parse one ``files`` entry; a malformed entry is a CareError naming ``source``."""
        if (not isinstance(data, Mapping) or not isinstance(data.get("sha256"), str)
                or not isinstance(data.get("bytes"), int)):
            raise IndexDamagedError(f"{source}: expected {{\"sha256\": hex, \"bytes\": int}}, got {data!r}; "
                                    "the manifest is damaged — rebuild the index with 'care index build --merge'")
        return cls(sha256=data["sha256"], bytes=data["bytes"])


def record_files(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{relative name: {"sha256", "bytes"}}`` of the files ``names`` (POSIX paths relative to ``folder``)."""
    return {name: FileChecksum.of(folder / name).to_dict() for name in sorted(names)}


def files_under(folder: Path, sub: str) -> list[str]:
    """POSIX paths, relative to ``folder``, of every file under ``folder/sub`` (sorted)."""
    root = folder / sub
    return sorted(p.relative_to(folder).as_posix() for p in root.rglob("*") if p.is_file())


def verify_files(folder: Path, files: Mapping[str, Any], mode: str) -> None:
    """Check every file of ``files`` (the manifest's map) in ``folder`` at level ``mode``.

    Raises:
        IndexDamagedError: a file missing, of another size, or (``full``) with another SHA-256 — naming the
            file, the recorded and the found value, and the rebuild command.
    """
    check_verify_mode(mode)
    if mode == OFF:
        return
    for name, entry in files.items():
        expected = FileChecksum.from_dict(entry, f"{folder}/manifest.json files[{name!r}]")
        path = folder / name
        if not path.is_file():
            raise IndexDamagedError(f"{path} is missing (manifest.json records {expected.bytes} bytes); "
                                    f"{rebuild_hint(folder)}")
        size = os.path.getsize(path)
        if size != expected.bytes:
            raise IndexDamagedError(f"{path} is damaged (corrupt or truncated): {size} bytes, but manifest.json "
                                    f"records {expected.bytes}; {rebuild_hint(folder)}")
        if mode == FULL:
            found = file_sha256(path)
            if found != expected.sha256:
                raise IndexDamagedError(f"{path} is damaged (corrupt or truncated): sha256 {found}, but manifest.json "
                                        f"records {expected.sha256}; {rebuild_hint(folder)}")
    logger.info("%s: %d file(s) match manifest.json (%s check)", folder, len(files),
                "sha256 + size" if mode == FULL else "size")
