"""Content hashes: the hex digest of a text, of bytes, of a stream of chunks, of a file — the one place care
hashes content (cache keys, fingerprints, manifests' file digests, integrity checks, prompt and judge keys).

Text is hashed as its UTF-8 bytes; a stream of chunks hashes like their concatenation, so a corpus of any size is
hashed without holding it. This module imports nothing of care: every layer may use it (like :mod:`care.errors`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

#: The algorithm of every digest unless a caller names another (cache keys of older formats use SHA-1).
SHA256 = "sha256"
SHA1 = "sha1"
#: Bytes read at a time when hashing a file's content.
FILE_BLOCK_BYTES = 1 << 20


def chunks_hex_digest(chunks: Iterable[str | bytes], *, algorithm: str = SHA256, length: int | None = None) -> str:
    """The hex digest of the concatenated ``chunks`` (``str`` chunks as UTF-8), its first ``length`` hex
    characters when ``length`` is given."""
    hasher = hashlib.new(algorithm)
    for chunk in chunks:
        hasher.update(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
    return hasher.hexdigest()[:length]


def hex_digest(data: str | bytes, *, algorithm: str = SHA256, length: int | None = None) -> str:
    """The hex digest of ``data`` (a ``str`` as UTF-8), its first ``length`` hex characters when given:
    ``hex_digest("abc", length=16) == hashlib.sha256(b"abc").hexdigest()[:16]``."""
    return chunks_hex_digest((data,), algorithm=algorithm, length=length)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's content, read :data:`FILE_BLOCK_BYTES` at a time."""
    with open(path, "rb") as fh:
        return chunks_hex_digest(iter(lambda: fh.read(FILE_BLOCK_BYTES), b""))
