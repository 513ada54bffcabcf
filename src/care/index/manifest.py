"""What an index folder holds, as JSON-round-tripping dataclasses.

An index folder written by ``care index build`` looks like::

    DIR/
      plan.json                          BuildPlan: model, corpus hash, shard ranges (same in every process)
      shards/shard-00000-of-00004.npy    float16 (rows, dim) memmap of one shard's document vectors
      shards/shard-00000-of-00004.json   ShardRecord: written last, marks the shard finished
      index/index.faiss + index/index.json   the FAISS index (care.index.FaissIndex.save)
        or index/milvus.json                 where the Milvus collection lives (care.index.milvus)
      docstore.sqlite                    row -> id, title, text, metadata (care.index.docstore)
      manifest.json                      IndexManifest: written last by the merge, marks the index complete

Every file is written atomically (temporary file + rename), so a crash leaves either the old file
or the new one, never half of one. The manifest records the size and SHA-256 of every other file the
merge leaves (``files``, :mod:`care.index.integrity`), and each shard record those of its ``.npy``, so damage
done later (a flipped byte, a truncated copy) is found before the file is used.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.config import build
from care.data.io import write_json
from care.encoders.fingerprint import digest
from care.errors import CareError
from care.index.integrity import IndexDamagedError, rebuild_hint

#: 2: the manifest records file checksums (``files``) and the vectors' norm range; shard records their file's.
MANIFEST_VERSION = 2
PLAN_FILE = "plan.json"
MANIFEST_FILE = "manifest.json"
SHARDS_DIR = "shards"
INDEX_DIR = "index"
DOCSTORE_FILE = "docstore.sqlite"
EMBEDDING_DTYPE = "float16"
#: Key of ``manifest.json`` holding the digest of the rest of it (:func:`~care.encoders.fingerprint.digest`): a
#: manifest altered after it was written (a flipped byte that still parses) is refused.
CONTENT_DIGEST = "content_digest"


def shard_name(shard: int, num_shards: int) -> str:
    """``shard-00001-of-00004`` for shard 1 of 4 (0-based, the same numbers as ``--shard 1/4`` and torchrun ranks)."""
    return f"shard-{shard:05d}-of-{num_shards:05d}"


def _from_dict(cls: type, data: dict[str, Any], source: str) -> Any:
    return build(cls, data, source=source, hint="the folder is damaged — rebuild it")


def read_json_file(path: Path, what: str) -> dict[str, Any]:
    """Read a JSON object, with a clear error for a missing or corrupt file."""
    if not path.is_file():
        raise CareError(f"{path} is missing: {what}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CareError(f"{path}: corrupt JSON ({exc}); rebuild the index with 'care index build'") from None
    if not isinstance(data, dict):
        raise CareError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class BuildPlan:
    """The plan every shard process derives from the same inputs; a rerun must match it.

    Attributes:
        model: the model spec given to ``--model``.
        model_identity: :func:`care.encoders.sides.model_identity` of the model.
        encoder_fingerprint: fingerprint of the document encoder (weights + encoding settings).
        corpus: path of the corpus JSONL as given.
        corpus_sha256: sha256 of the corpus file's bytes.
        n_docs: documents in the corpus.
        num_shards: number of shards; shard ``i`` covers rows ``ranges[i][0] .. ranges[i][1]-1``.
        ranges: ``[start, end)`` row ranges, contiguous, covering the corpus.
        instruction: the query instruction the service applies (documents are encoded without one).
        dtype: storage type of the shard files.
    """

    model: str
    model_identity: str
    encoder_fingerprint: str
    corpus: str
    corpus_sha256: str
    n_docs: int
    num_shards: int
    ranges: list[list[int]]
    instruction: str | None = None
    dtype: str = EMBEDDING_DTYPE
    format_version: int = MANIFEST_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = PLAN_FILE) -> BuildPlan:
        return _from_dict(cls, data, source)

    def save(self, folder: Path) -> None:
        write_json(folder / PLAN_FILE, self.to_dict())

    @classmethod
    def load(cls, folder: Path) -> BuildPlan:
        path = folder / PLAN_FILE
        return cls.from_dict(read_json_file(path, "not an index build folder"), source=str(path))


@dataclass(frozen=True)
class ShardRecord:
    """Written when a shard's vectors are complete (its presence marks the shard finished). ``copied_rows``: rows
    copied from an embedding cache instead of encoded (``BuildOptions.cache_dir``). ``sha256`` / ``file_bytes``: of
    the shard's ``.npy`` when it was finished (the merge checks them; empty / 0 in records of older builds)."""

    shard: int
    num_shards: int
    start: int
    end: int
    dim: int
    encoder_fingerprint: str
    seconds: float
    dtype: str = EMBEDDING_DTYPE
    copied_rows: int = 0
    sha256: str = ""
    file_bytes: int = 0

    @property
    def rows(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "shard record") -> ShardRecord:
        return _from_dict(cls, data, source)


@dataclass(frozen=True)
class IndexManifest:
    """Everything the service needs to trust an index folder (``manifest.json``).

    Attributes:
        model / model_identity / encoder_fingerprint / corpus / corpus_sha256 / instruction: from the plan.
        dim: vector width (the query encoder must produce the same).
        n_docs: vectors in the index = rows in the document store.
        backend: ``faiss`` or ``milvus``.
        index: the backend's settings (FAISS :class:`~care.index.config.IndexConfig` dict, or Milvus URI
            and collection).
        shards: the :class:`ShardRecord` dicts the index was merged from.
        encode_seconds: sum of the shards' encoding times.
        files: ``{relative path: {"sha256", "bytes"}}`` of every file the merge left in the folder except this
            manifest and the shards (:func:`care.index.integrity.record_files`); empty in a manifest written
            before checksums existed (format version 1).
        norm_range: ``[smallest, largest]`` L2 norm of the indexed vectors (``[]`` when not recorded): the
            service checks the vectors it can read back against it.
    """

    model: str
    model_identity: str
    encoder_fingerprint: str
    corpus: str
    corpus_sha256: str
    instruction: str | None
    dim: int
    n_docs: int
    backend: str
    index: dict[str, Any]
    shards: list[dict[str, Any]] = field(default_factory=list)
    encode_seconds: float = 0.0
    dtype: str = EMBEDDING_DTYPE
    format_version: int = MANIFEST_VERSION
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    norm_range: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = MANIFEST_FILE) -> IndexManifest:
        """Build from ``manifest.json``'s fields (its ``content_digest``, checked by :meth:`load`, is ignored)."""
        manifest = _from_dict(cls, {k: v for k, v in data.items() if k != CONTENT_DIGEST}, source)
        if manifest.format_version > MANIFEST_VERSION:
            raise CareError(f"{source}: format version {manifest.format_version} is newer than this care ({MANIFEST_VERSION}); upgrade care")
        return manifest

    def save(self, folder: Path) -> None:
        """Write ``manifest.json`` with the digest of its own content (``content_digest``)."""
        data = self.to_dict()
        write_json(folder / MANIFEST_FILE, {**data, CONTENT_DIGEST: digest(data)})

    @classmethod
    def load(cls, folder: str | Path) -> IndexManifest:
        """Read ``manifest.json``; a missing one means the build never finished its merge step.

        Raises:
            IndexDamagedError: its content differs from the digest it was written with (manifests written before
                the digest existed carry none and are not checked).
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise CareError(f"index folder {folder} does not exist; build one with 'care index build'")
        path = folder / MANIFEST_FILE
        data = read_json_file(
            path, "the index is incomplete (the merge step did not run or failed); run 'care index build --merge --output "
            f"{folder}' after every shard has finished",
        )
        recorded = data.get(CONTENT_DIGEST)
        manifest = cls.from_dict(data, source=str(path))
        if recorded is not None and recorded != digest({k: v for k, v in data.items() if k != CONTENT_DIGEST}):
            raise IndexDamagedError(f"{path} is damaged: its content does not match the {CONTENT_DIGEST} it was written "
                                    f"with ({recorded!r}); {rebuild_hint(folder)}")
        return manifest
