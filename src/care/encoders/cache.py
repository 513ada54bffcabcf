"""On-disk embedding cache: encode a text collection once, in resumable chunks, and memory-map it.

An entry is keyed by ``sha256(encoder fingerprint, role, instruction, content hash)`` where the
content hash covers the ids and texts in order; it lives in ``<root>/<key[:2]>/<key>/``:

- ``embeddings.npy`` — an ``(n, dim)`` float32 or float16 array, opened as a read-only memmap;
- ``manifest.json`` — what the entry holds (written last, atomically; its presence marks completion);
- ``row_digests.npy`` — the SHA-1 of each row's text (written before the manifest), so that a later entry of the
  same encoder, role and instruction copies the rows of texts it shares instead of encoding them again (a
  corpus with a few documents added, Stage I's alignment texts grown by a query log: the paper's document
  encoder is an LLM, and a grown text set should cost only its new texts).

While encoding, rows go to ``embeddings.partial.npy`` chunk by chunk and ``progress.json`` records
how many rows are finished (written atomically after each chunk is flushed), so an interrupted run
resumes at the last finished chunk. Only one chunk of texts is handed to the encoder at a time;
chunks start at 256 texts and double while one takes under 5 s (up to 65,536), so fast encoders pay
little bookkeeping and slow ones still checkpoint (and update the progress bar) often.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from care.data.io import new_temporary_sibling, write_json
from care.errors import CareError
from care.hashes import SHA1, chunks_hex_digest, hex_digest

logger = logging.getLogger(__name__)

#: Environment variable that overrides the default cache folder.
CACHE_ENV = "CARE_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("~/.cache/care/embeddings")
#: Texts handed to the encoder in the first resumable chunk.
DEFAULT_CHUNK_SIZE = 256
#: Chunks grow (doubling, up to MAX_CHUNK_SIZE) while one takes less than half this many seconds, so
#: fast encoders pay little per-chunk bookkeeping and slow ones still checkpoint often.
TARGET_CHUNK_SECONDS = 10.0
MAX_CHUNK_SIZE = 65_536
CACHE_DTYPES = ("float32", "float16")
#: The roles entries are cached under: one text collection has one entry per role (and instruction).
QUERY_ROLE, DOCUMENT_ROLE = "query", "document"
CACHE_FORMAT_VERSION = 1

EMBEDDINGS_FILE = "embeddings.npy"
PARTIAL_FILE = "embeddings.partial.npy"
PROGRESS_FILE = "progress.json"
MANIFEST_FILE = "manifest.json"
ROW_DIGESTS_FILE = "row_digests.npy"

EncodeFn = Callable[[Sequence[str]], np.ndarray]


def default_cache_dir() -> Path:
    """``$CARE_CACHE_DIR`` if set, else ``~/.cache/care/embeddings``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else DEFAULT_CACHE_DIR.expanduser()


def content_hash(ids: Sequence[str], texts: Sequence[str]) -> str:
    """Order-sensitive sha256 of ``(id, text)`` pairs (separators make the encoding unambiguous)."""
    if len(ids) != len(texts):
        raise CareError(f"content_hash: {len(ids)} ids but {len(texts)} texts")
    return streamed_content_hash(zip(ids, texts))[0]


def streamed_content_hash(pairs: Iterable[tuple[str, str]]) -> tuple[str, int]:
    """:func:`content_hash` of ``(id, text)`` pairs read one at a time (a corpus of any size), and their count."""
    n = 0

    def chunks() -> Iterator[str]:
        nonlocal n
        for doc_id, text in pairs:
            n += 1
            yield f"{doc_id}\x1f{text}\x1e"

    digest = chunks_hex_digest(chunks())
    return digest, n


def row_digests(texts: Sequence[str]) -> np.ndarray:
    """The SHA-1 of each text (a ``(n,)`` array of 20-byte strings): what :meth:`EmbeddingCache.get_or_encode`
    matches rows of earlier entries by (an encoder's vector of a text does not depend on the text's id)."""
    return np.array([bytes.fromhex(hex_digest(t, algorithm=SHA1)) for t in texts], dtype="S20")


def check_embeddings(arr: np.ndarray, n_rows: int, what: str, dim: int | None = None) -> np.ndarray:
    """Return ``arr`` as a 2-D float array after checking its shape and that every value is finite.

    Raises:
        CareError: wrong number of rows or dims, a dimension different from ``dim``, NaN or inf.
    """
    arr = np.asarray(arr)
    if arr.ndim != 2 or arr.shape[0] != n_rows:
        raise CareError(f"{what}: expected an array of shape ({n_rows}, dim), got {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise CareError(f"{what}: expected dimension {dim}, got {arr.shape[1]}")
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).sum())
        raise CareError(f"{what}: {bad} row(s) contain NaN or inf — check the model weights and inputs")
    return arr


@dataclass(frozen=True)
class CacheKey:
    """What identifies a cached embedding matrix."""

    fingerprint: str
    role: str
    instruction: str | None
    content: str
    n_rows: int

    @property
    def digest(self) -> str:
        payload = json.dumps([CACHE_FORMAT_VERSION, self.fingerprint, self.role, self.instruction, self.content, self.n_rows])
        return hex_digest(payload)


class EmbeddingCache:
    """A folder of cached embedding matrices (see the module docstring for the layout).

    Args:
        root: cache folder (created on demand).
        dtype: storage type, ``"float32"`` (exact) or ``"float16"`` (half the disk; the harness
            converts batches back to float32 before search).
        chunk_size: texts encoded in the first resumable chunk.
        grow_chunks: double the chunk size while a chunk takes under ``TARGET_CHUNK_SECONDS / 2``.
    """

    def __init__(
        self, root: str | Path, *, dtype: str = "float32", chunk_size: int = DEFAULT_CHUNK_SIZE, grow_chunks: bool = True,
    ) -> None:
        if dtype not in CACHE_DTYPES:
            raise CareError(f"cache dtype must be one of {CACHE_DTYPES}, got {dtype!r}")
        if chunk_size < 1:
            raise CareError(f"chunk_size must be >= 1, got {chunk_size}")
        self.root = Path(root).expanduser()
        self.dtype = dtype
        self.chunk_size = chunk_size
        self.grow_chunks = grow_chunks

    def key(self, fingerprint: str, role: str, instruction: str | None, ids: Sequence[str], texts: Sequence[str]) -> CacheKey:
        return CacheKey(fingerprint, role, instruction or None, content_hash(ids, texts), len(texts))

    def streamed_key(self, fingerprint: str, role: str, instruction: str | None,
                     pairs: Iterable[tuple[str, str]]) -> CacheKey:
        """:meth:`key` of ``(id, text)`` pairs read one at a time, without holding the texts."""
        content, n_rows = streamed_content_hash(pairs)
        return CacheKey(fingerprint, role, instruction or None, content, n_rows)

    def entry_dir(self, key: CacheKey) -> Path:
        digest = key.digest
        return self.root / digest[:2] / digest

    def lookup(self, key: CacheKey) -> np.ndarray | None:
        """Return the cached matrix as a read-only memmap, or ``None`` when not (fully) cached."""
        folder = self.entry_dir(key)
        if not (folder / MANIFEST_FILE).is_file() or not (folder / EMBEDDINGS_FILE).is_file():
            return None
        arr = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")
        if arr.ndim != 2 or arr.shape[0] != key.n_rows:
            logger.warning("cache entry %s has shape %s, expected %d rows; re-encoding", folder, arr.shape, key.n_rows)
            return None
        return arr

    def store(self, key: CacheKey, embeddings: np.ndarray, *, name: str = "") -> np.ndarray:
        """Store a precomputed matrix (e.g. embeddings produced elsewhere) as a complete entry."""
        embeddings = check_embeddings(embeddings, key.n_rows, f"embeddings for {name or key.fingerprint}")
        folder = self.entry_dir(key)
        folder.mkdir(parents=True, exist_ok=True)
        _save_array(folder / EMBEDDINGS_FILE, np.asarray(embeddings, dtype=self.dtype))
        self._write_manifest(key, folder, int(embeddings.shape[1]), name)
        return np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")

    def _write_manifest(self, key: CacheKey, folder: Path, dim: int, name: str) -> None:
        write_json(folder / MANIFEST_FILE, {
            "format_version": CACHE_FORMAT_VERSION, "encoder": name, "fingerprint": key.fingerprint,
            "role": key.role, "instruction": key.instruction, "content_sha256": key.content,
            "rows": key.n_rows, "dim": dim, "dtype": self.dtype,
        })

    def get_or_encode(
        self,
        key: CacheKey,
        texts: Sequence[str],
        encode: EncodeFn,
        *,
        name: str = "",
        progress: Any | None = None,
    ) -> np.ndarray:
        """Return the embeddings of ``texts`` (a read-only ``(n, dim)`` memmap), encoding what is missing.

        Args:
            key: from :meth:`key` for exactly these texts.
            texts: the texts, in the order the rows must follow.
            encode: maps a chunk of texts to a ``(len(chunk), dim)`` array.
            name: encoder name for messages and the manifest.
            progress: optional tqdm-like object; ``update(n)`` is called per finished chunk.
        """
        if len(texts) != key.n_rows:
            raise CareError(f"cache key was made for {key.n_rows} texts but {len(texts)} were given")
        cached = self.lookup(key)
        if cached is not None:
            logger.info("embedding cache hit: %s %s (%d rows)", name, key.role, key.n_rows)
            if progress is not None:
                progress.update(key.n_rows)
            return cached
        folder = self.entry_dir(key)
        folder.mkdir(parents=True, exist_ok=True)
        done, dim = self._read_progress(folder, key)
        partial = folder / PARTIAL_FILE
        out: np.memmap | None = None
        if done:
            out = np.load(partial, mmap_mode="r+")
            logger.info("resuming %s %s embeddings at row %d of %d", name, key.role, done, key.n_rows)
            if progress is not None:
                progress.update(done)
        digests = row_digests(texts)
        reuse = self._earlier_rows(key, folder, digests[done:], done)
        start, size = done, self.chunk_size
        while start < key.n_rows:
            chunk = texts[start : start + size]
            t0 = time.perf_counter()
            vecs = check_embeddings(_encode_missing(chunk, start, reuse, encode), len(chunk),
                                    f"{name or 'encoder'} {key.role} embeddings", dim)
            if out is None:
                dim = int(vecs.shape[1])
                out = np.lib.format.open_memmap(partial, mode="w+", dtype=self.dtype, shape=(key.n_rows, dim))
            out[start : start + len(chunk)] = vecs
            out.flush()
            write_json(folder / PROGRESS_FILE, {"done": start + len(chunk), "dim": dim, "dtype": self.dtype, "rows": key.n_rows})
            if progress is not None:
                progress.update(len(chunk))
            start += len(chunk)
            if self.grow_chunks and time.perf_counter() - t0 < TARGET_CHUNK_SECONDS / 2:
                size = min(size * 2, MAX_CHUNK_SIZE)
        if out is None:  # zero rows
            raise CareError("nothing to encode: the text list is empty")
        del out
        os.replace(partial, folder / EMBEDDINGS_FILE)
        _save_array(folder / ROW_DIGESTS_FILE, digests)
        self._write_manifest(key, folder, int(dim or 0), name)
        (folder / PROGRESS_FILE).unlink(missing_ok=True)
        return np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")

    def _earlier_rows(self, key: CacheKey, folder: Path, digests: np.ndarray, offset: int) -> dict[int, np.ndarray]:
        """Rows (by position in the new entry, from ``offset``) whose text a finished entry of the same
        fingerprint, role, instruction and dtype already holds, mapped to that entry's vector."""
        wanted: dict[bytes, list[int]] = {}
        for i, digest in enumerate(digests.tolist()):
            wanted.setdefault(digest, []).append(offset + i)
        found: dict[int, np.ndarray] = {}
        for manifest in sorted(self.root.glob(f"*/*/{MANIFEST_FILE}")):
            other = manifest.parent
            if other == folder or not (other / ROW_DIGESTS_FILE).is_file() or not wanted:
                continue
            try:
                meta = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            if (meta.get("fingerprint"), meta.get("role"), meta.get("instruction"), meta.get("dtype")) != (
                    key.fingerprint, key.role, key.instruction, self.dtype):
                continue
            matrix, held = np.load(other / EMBEDDINGS_FILE, mmap_mode="r"), np.load(other / ROW_DIGESTS_FILE)
            if matrix.ndim != 2 or matrix.shape[0] != len(held):
                continue
            for row, digest in enumerate(held.tolist()):
                for position in wanted.pop(digest, ()):
                    found[position] = matrix[row]
        if found:
            logger.info("embedding cache: %d of %d rows copied from earlier entries of this encoder",
                        len(found), len(digests))
        return found

    def _read_progress(self, folder: Path, key: CacheKey) -> tuple[int, int | None]:
        progress, partial = folder / PROGRESS_FILE, folder / PARTIAL_FILE
        if not progress.is_file() or not partial.is_file():
            return 0, None
        try:
            state = json.loads(progress.read_text(encoding="utf-8"))
            done, dim = int(state["done"]), int(state["dim"])
            if state.get("dtype") != self.dtype or int(state.get("rows", -1)) != key.n_rows or not 0 < done <= key.n_rows:
                raise ValueError("stale progress")
        except (ValueError, KeyError, json.JSONDecodeError):
            logger.warning("ignoring unreadable or stale partial cache in %s", folder)
            return 0, None
        return done, dim

    def clear(self, key: CacheKey) -> None:
        """Remove one entry (finished or partial)."""
        shutil.rmtree(self.entry_dir(key), ignore_errors=True)


def _encode_missing(chunk: Sequence[str], start: int, reuse: dict[int, np.ndarray], encode: EncodeFn) -> np.ndarray:
    """``encode(chunk)``, except the rows ``reuse`` holds (by position in the entry): only the rest is encoded."""
    held = [i for i in range(len(chunk)) if start + i in reuse]
    if not held:
        return encode(chunk)
    missing = [i for i in range(len(chunk)) if start + i not in reuse]
    vecs = np.empty((len(chunk), len(reuse[start + held[0]])), dtype=np.float32)
    for i in held:
        vecs[i] = reuse[start + i]
    if missing:
        vecs[missing] = check_embeddings(encode([chunk[i] for i in missing]), len(missing), "encoder output",
                                         vecs.shape[1])
    return vecs


def _save_array(path: Path, array: np.ndarray) -> None:
    """``np.save`` through a temporary sibling and a rename (never a half-written file)."""
    fd, tmp = new_temporary_sibling(path, suffix=".npy")
    os.close(fd)
    try:
        np.save(tmp, array)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def temporary_cache(*, dtype: str = "float32", chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[EmbeddingCache]:
    """A throw-away cache in a temporary folder (``--no-cache``): still chunked and memory-mapped."""
    with tempfile.TemporaryDirectory(prefix="care-emb-") as tmp:
        yield EmbeddingCache(tmp, dtype=dtype, chunk_size=chunk_size)
