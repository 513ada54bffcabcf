"""Encode a corpus offline with the document encoder, in resumable shards, and merge it into an index.

Two steps, each safe to interrupt and re-run (layout in :mod:`care.index.manifest`):

1. **encode** (:func:`encode_shards`): the corpus rows are split into ``num_shards`` contiguous ranges;
   a process encodes one shard (``--shard i/N``, or ``RANK``/``WORLD_SIZE`` under torchrun /
   accelerate) or all of them in turn. Vectors go to a float16 ``.npy`` memmap chunk by chunk and
   ``progress.json`` records the finished rows, so a killed process resumes at its last chunk. The
   finished shard file itself is the record of completion: the shard's ``.json`` record is written
   first, then ``.partial.npy`` is renamed to ``.npy`` — a shard is finished exactly when its
   ``.npy`` exists, and is then skipped (its record is rebuilt from the file if a crash of an older
   version lost it). A resumed shard removes the temporary files a kill -9 left behind. Only the
   document encoder is loaded — for a CARE folder, only the document route. Vectors already in an embedding
   cache for this model and this exact corpus (``BuildOptions.cache_dir``: what ``care bench`` and ``care run``'s
   evaluation wrote when they scored a task on it) are copied instead of encoded.
2. **merge** (:func:`merge_shards`): once every shard is finished, the vectors are streamed into a
   FAISS index (flat / HNSW / IVF / IVF-PQ, :class:`~care.index.config.IndexConfig`) or a Milvus
   collection, the document store is written, and ``manifest.json`` last. It runs automatically in the
   process that finishes the last shard (a file lock keeps concurrent processes from merging twice),
   or explicitly with ``care index build --merge``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from care.data.io import write_json
from care.data.retrieval import check_corpus, iter_documents, iter_numbered_documents
from care.errors import CareError, DimensionMismatchError
from care.hashes import file_sha256
from care.index.config import IndexConfig
from care.index.integrity import FileChecksum, IndexDamagedError, files_under, record_files
from care.index.manifest import (
    DOCSTORE_FILE,
    EMBEDDING_DTYPE,
    INDEX_DIR,
    MANIFEST_FILE,
    PLAN_FILE,
    SHARDS_DIR,
    BuildPlan,
    IndexManifest,
    ShardRecord,
    read_json_file,
    shard_name,
)

logger = logging.getLogger(__name__)

#: Documents encoded (and flushed to disk) per resumable chunk.
DEFAULT_CHUNK_SIZE = 1024
DEFAULT_BATCH_SIZE = 32
#: Rows converted to float32 and added to the index at a time while merging.
MERGE_BLOCK_ROWS = 65_536
BACKENDS = ("faiss", "milvus")
LOCK_FILE = "merge.lock"


@dataclass
class BuildOptions:
    """Inputs of an index build (the CLI's flags).

    Attributes:
        model: model spec (a CARE folder loads only its document route).
        corpus: ``corpus.jsonl`` as :mod:`care.data.retrieval` reads it (``id`` or ``_id``, ``text``, optional
            ``title``; other fields become metadata); the encoder sees ``Document.full_text``.
        output: the index folder.
        num_shards: shards of the corpus (ignored under torchrun, where it is ``WORLD_SIZE``).
        index: FAISS index settings.
        backend: ``faiss`` or ``milvus``.
        milvus_uri / milvus_collection: Milvus target (a ``.db`` file path = milvus-lite, or ``http://host:19530``).
        instruction: query instruction recorded for the service (documents are encoded without one).
        batch_size / chunk_size: encoder batch; rows per resumable chunk.
        device / dtype: for Hugging Face encoders.
        cache_dir: an embedding cache (:mod:`care.encoders.cache`) read before encoding: when it holds this
            corpus's document vectors from this model (what ``care bench`` and ``care run``'s evaluation
            cache when they score a retrieval task on the same ``corpus.jsonl``), shards copy them instead of
            encoding. Read only; ``None``: always encode.
    """

    model: str
    corpus: Path
    output: Path
    num_shards: int = 1
    index: IndexConfig = field(default_factory=IndexConfig)
    backend: str = "faiss"
    milvus_uri: str | None = None
    milvus_collection: str = "care"
    instruction: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    chunk_size: int = DEFAULT_CHUNK_SIZE
    device: str | None = None
    dtype: str = "auto"
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        self.corpus, self.output = Path(self.corpus), Path(self.output)
        self.cache_dir = Path(self.cache_dir) if self.cache_dir is not None else None
        if self.backend not in BACKENDS:
            raise CareError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        for name in ("num_shards", "batch_size", "chunk_size"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"{name} must be >= 1, got {getattr(self, name)}")


# ------------------------------------------------------------------------------------------ corpus
def shard_ranges(n_docs: int, num_shards: int) -> list[list[int]]:
    """Contiguous ``[start, end)`` ranges; shard sizes differ by at most one row."""
    if num_shards > n_docs:
        raise CareError(f"{num_shards} shards for {n_docs} documents: use at most {n_docs} shards")
    return [[i * n_docs // num_shards, (i + 1) * n_docs // num_shards] for i in range(num_shards)]


def parse_shard(value: str) -> tuple[int, int]:
    """``"2/8"`` -> ``(2, 8)`` (0-based shard index, like a torchrun rank)."""
    index, sep, total = value.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise CareError(f"--shard expects i/N with 0 <= i < N (e.g. 0/4), got {value!r}") from None
    if not sep or n < 1 or not 0 <= i < n:
        raise CareError(f"--shard expects i/N with 0 <= i < N (e.g. 0/4), got {value!r}")
    return i, n


def distributed_shard() -> tuple[int, int] | None:
    """``(RANK, WORLD_SIZE)`` when launched by torchrun / accelerate with more than one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    return int(os.environ.get("RANK", "0")), world


# ------------------------------------------------------------------------------------------ plan
def _plan_mismatch(old: BuildPlan, new: dict[str, Any], folder: Path) -> CareError | None:
    for key, value in new.items():
        if getattr(old, key) != value:
            return CareError(
                f"{folder} was started with a different {key} ({getattr(old, key)!r}, now {value!r}); "
                "finish it with the original inputs, or build into a new --output folder"
            )
    return None


def prepare_plan(options: BuildOptions, num_shards: int, encoder: Any | None) -> tuple[BuildPlan, Any]:
    """Read or create ``plan.json``; returns the plan and the encoder (loaded when it was needed).

    Raises:
        CareError: the folder holds a plan for another model, corpus or shard count.
    """
    from care.encoders.sides import model_identity

    folder = options.output
    corpus_sha = file_sha256(options.corpus) if options.corpus.is_file() else ""
    identity = model_identity(options.model)
    expected = {"model_identity": identity, "corpus_sha256": corpus_sha, "num_shards": num_shards}
    if (folder / "plan.json").is_file():
        plan = BuildPlan.load(folder)
        error = _plan_mismatch(plan, expected, folder)
        if error is not None:
            raise error
        return plan, encoder
    n_docs = check_corpus(options.corpus)
    ranges = shard_ranges(n_docs, num_shards)
    encoder = encoder or _load_encoder(options)
    plan = BuildPlan(
        model=options.model, model_identity=identity, encoder_fingerprint=encoder.fingerprint,
        corpus=str(options.corpus), corpus_sha256=corpus_sha, n_docs=n_docs, num_shards=num_shards,
        ranges=ranges, instruction=options.instruction,
    )
    folder.mkdir(parents=True, exist_ok=True)
    plan.save(folder)
    logger.info("planned %d documents in %d shard(s) in %s", n_docs, num_shards, folder)
    return plan, encoder


def cached_document_vectors(options: BuildOptions, encoder: Any) -> np.ndarray | None:
    """The corpus's document vectors from the embedding cache at ``options.cache_dir`` (a read-only memmap,
    one row per corpus row), or None when it holds none.

    A cache entry matches when it was written for this encoder's document side (its role fingerprint), without an
    instruction, for exactly this corpus: the same ids and texts (``Document.full_text``) in the same order. The
    corpus is streamed once to hash it.
    """
    if options.cache_dir is None:
        return None
    from care.encoders.base import role_fingerprint
    from care.encoders.cache import DOCUMENT_ROLE, EmbeddingCache

    cache = EmbeddingCache(options.cache_dir)
    if not cache.root.is_dir():  # no cache at all: spare the pass over the corpus that hashing it takes
        return None
    key = cache.streamed_key(role_fingerprint(encoder, DOCUMENT_ROLE), DOCUMENT_ROLE, None,
                             ((doc.id, doc.full_text) for doc in iter_documents(options.corpus)))
    vectors = cache.lookup(key)
    if vectors is not None:
        logger.info("the embedding cache %s holds this corpus's document vectors from %s (%d rows): copying them, "
                    "not encoding", options.cache_dir, encoder.name, key.n_rows)
    return vectors


def _load_encoder(options: BuildOptions) -> Any:
    from care.encoders.hf import launcher_device
    from care.encoders.sides import load_side

    return load_side(options.model, "document", device=options.device or launcher_device(),
                     batch_size=options.batch_size, dtype=options.dtype)


# ------------------------------------------------------------------------------------------ encode
def shard_paths(folder: Path, shard: int, num_shards: int) -> dict[str, Path]:
    base = folder / SHARDS_DIR / shard_name(shard, num_shards)
    return {
        "vectors": base.with_suffix(".npy"),
        "record": base.with_suffix(".json"),
        "partial": base.with_name(base.name + ".partial.npy"),
        "progress": base.with_name(base.name + ".progress.json"),
    }


def read_shard_record(folder: Path, shard: int, num_shards: int) -> ShardRecord | None:
    """The finished shard's record, or None while it is unfinished."""
    paths = shard_paths(folder, shard, num_shards)
    if not paths["record"].is_file() or not paths["vectors"].is_file():
        return None
    data = read_json_file(paths["record"], "shard record")
    return ShardRecord.from_dict(data, source=str(paths["record"]))


def _shard_texts(corpus: Path, start: int, end: int, chunk_size: int) -> Iterator[tuple[int, list[str]]]:
    """``(first_row, texts)`` chunks of rows ``start .. end-1``."""
    chunk: list[str] = []
    chunk_start = start
    for row, doc in enumerate(iter_documents(corpus)):
        if row < start:
            continue
        if row >= end:
            break
        chunk.append(doc.full_text)
        if len(chunk) == chunk_size:
            yield chunk_start, chunk
            chunk_start, chunk = chunk_start + len(chunk), []
    if chunk:
        yield chunk_start, chunk


def encode_shard(options: BuildOptions, plan: BuildPlan, shard: int, encoder: Any,
                 cached: np.ndarray | None = None) -> ShardRecord:
    """Encode one shard, resuming from its last finished chunk; returns its record. ``cached``: the whole
    corpus's vectors (:func:`cached_document_vectors`), whose rows are copied instead of encoded.

    Raises:
        CareError: non-finite vectors, or an encoder whose fingerprint differs from the plan's.
    """
    from care.encoders.cache import check_embeddings

    if encoder.fingerprint != plan.encoder_fingerprint:
        raise CareError(
            f"the document encoder's fingerprint {encoder.fingerprint} differs from the one this build started with "
            f"({plan.encoder_fingerprint}): same model folder but other settings (dtype, max length, ...) — use the "
            "original settings or a new --output folder"
        )
    start, end = plan.ranges[shard]
    paths = shard_paths(options.output, shard, plan.num_shards)
    paths["vectors"].parent.mkdir(parents=True, exist_ok=True)
    done, dim = _read_progress(paths, end - start)
    out = np.load(paths["partial"], mmap_mode="r+") if done else None
    if done:
        logger.info("shard %s: resuming at row %d of %d", shard_name(shard, plan.num_shards), done, end - start)
    began = time.perf_counter()
    copied = 0
    for first, texts in _shard_texts(options.corpus, start + done, end, options.chunk_size):
        if cached is not None:
            vectors = np.asarray(cached[first : first + len(texts)], dtype=np.float32)
            copied += len(texts)
        else:
            vectors = encoder.encode_documents(texts, batch_size=options.batch_size)
        vectors = check_embeddings(vectors, len(texts), f"{encoder.name} document embeddings", dim)
        if out is None:
            dim = int(vectors.shape[1])
            out = np.lib.format.open_memmap(paths["partial"], mode="w+", dtype=EMBEDDING_DTYPE, shape=(end - start, dim))
        offset = first - start
        out[offset : offset + len(texts)] = vectors.astype(EMBEDDING_DTYPE)
        out.flush()
        write_json(paths["progress"], {"done": offset + len(texts), "dim": dim, "rows": end - start})
        logger.info("shard %s: %d / %d rows", shard_name(shard, plan.num_shards), offset + len(texts), end - start)
    if out is None or dim is None:
        raise CareError(f"shard {shard}: no rows to encode (corpus changed since planning?)")
    del out
    checksum = FileChecksum.of(paths["partial"])
    record = ShardRecord(shard=shard, num_shards=plan.num_shards, start=start, end=end, dim=dim,
                         encoder_fingerprint=encoder.fingerprint, seconds=round(time.perf_counter() - began, 3),
                         copied_rows=copied, sha256=checksum.sha256, file_bytes=checksum.bytes)
    write_json(paths["record"], record.to_dict())
    os.replace(paths["partial"], paths["vectors"])  # the commit point: the finished file is the record
    paths["progress"].unlink(missing_ok=True)
    return record


def _tidy_shard(folder: Path, shard: int, num_shards: int) -> None:
    """Remove what a killed run of this shard left behind: temporary files of interrupted atomic
    writes (``.shard-....json.XXXX.tmp``) and, once the shard is finished, its progress and partial files."""
    paths = shard_paths(folder, shard, num_shards)
    for stale in paths["vectors"].parent.glob(f".{shard_name(shard, num_shards)}*.tmp"):
        stale.unlink(missing_ok=True)
    if paths["vectors"].is_file():
        paths["progress"].unlink(missing_ok=True)
        paths["partial"].unlink(missing_ok=True)


def recover_shard_record(folder: Path, plan: BuildPlan, shard: int) -> ShardRecord | None:
    """The record of a shard whose ``.npy`` is complete but whose ``.json`` record is missing (a crash
    of an older version between the two), rebuilt from the file; None when the file is absent or not
    the shard's full size (it is then removed and the shard encoded again)."""
    paths = shard_paths(folder, shard, plan.num_shards)
    if not paths["vectors"].is_file() or paths["record"].is_file():
        return None
    start, end = plan.ranges[shard]
    try:
        vectors = np.load(paths["vectors"], mmap_mode="r")
        shape = vectors.shape
        del vectors
    except (OSError, ValueError):
        shape = ()
    if len(shape) != 2 or shape[0] != end - start:
        logger.warning("%s is not a complete shard (shape %s); encoding it again", paths["vectors"], shape)
        paths["vectors"].unlink()
        return None
    checksum = FileChecksum.of(paths["vectors"])
    record = ShardRecord(shard=shard, num_shards=plan.num_shards, start=start, end=end, dim=int(shape[1]),
                         encoder_fingerprint=plan.encoder_fingerprint, seconds=0.0, sha256=checksum.sha256,
                         file_bytes=checksum.bytes)
    write_json(paths["record"], record.to_dict())
    logger.info("shard %s was finished; its record is rebuilt from the vectors file", shard_name(shard, plan.num_shards))
    return record


def _read_progress(paths: dict[str, Path], rows: int) -> tuple[int, int | None]:
    if not paths["progress"].is_file() or not paths["partial"].is_file():
        return 0, None
    try:
        state = read_json_file(paths["progress"], "progress")
        done, dim = int(state["done"]), int(state["dim"])
        if int(state["rows"]) != rows or not 0 < done <= rows:
            raise ValueError("stale")
    except (CareError, KeyError, ValueError):
        logger.warning("ignoring unreadable progress of %s; the shard restarts", paths["partial"])
        return 0, None
    return done, dim


def encode_shards(options: BuildOptions, shard: tuple[int, int] | None = None) -> BuildPlan:
    """Encode the given shard ``(i, N)`` (default: the torchrun rank, else every shard of ``options.num_shards``).

    Finished shards are skipped without loading the model.
    """
    shard = shard or distributed_shard()
    num_shards = shard[1] if shard else options.num_shards
    plan, encoder = prepare_plan(options, num_shards, None)
    todo = [shard[0]] if shard else list(range(num_shards))
    cached: np.ndarray | None = None
    looked_up = False
    for i in todo:
        if read_shard_record(options.output, i, num_shards) is not None or recover_shard_record(options.output, plan, i):
            logger.info("shard %s is finished; skipping", shard_name(i, num_shards))
            _tidy_shard(options.output, i, num_shards)
            continue
        _tidy_shard(options.output, i, num_shards)
        encoder = encoder or _load_encoder(options)
        if not looked_up:
            cached, looked_up = cached_document_vectors(options, encoder), True
        encode_shard(options, plan, i, encoder, cached)
    return plan


# ------------------------------------------------------------------------------------------ merge
@contextlib.contextmanager
def merge_lock(folder: Path) -> Iterator[bool]:
    """Yield True if this process holds the merge lock (released when the process exits or the block ends)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def unfinished_shards(folder: Path, plan: BuildPlan) -> list[int]:
    return [i for i in range(plan.num_shards) if read_shard_record(folder, i, plan.num_shards) is None]


def merge_shards(options: BuildOptions) -> IndexManifest:
    """Build the index, the document store and ``manifest.json`` from finished shards.

    Raises:
        CareError: no plan, unfinished shards (named, with the command that finishes them), or shards
            of different widths / encoders.
    """
    folder = options.output
    plan = BuildPlan.load(folder)
    missing = unfinished_shards(folder, plan)
    if missing:
        names = ", ".join(f"{i}/{plan.num_shards}" for i in missing)
        raise CareError(f"{folder}: shard(s) {names} are not finished; run 'care index build --shard i/N' for each, then --merge")
    records = [read_shard_record(folder, i, plan.num_shards) for i in range(plan.num_shards)]
    dims = {r.dim for r in records if r is not None}
    prints = {r.encoder_fingerprint for r in records if r is not None}
    if len(dims) != 1:
        raise DimensionMismatchError(f"{folder}: shards have different widths {sorted(dims)}; rebuild the odd ones")
    if prints != {plan.encoder_fingerprint}:
        raise CareError(f"{folder}: shards were encoded by different encoders {sorted(prints)}; rebuild them")
    dim = dims.pop()
    check_shard_files(folder, [r for r in records if r is not None])
    corpus = options.corpus if options.corpus.is_file() else Path(plan.corpus)
    if not corpus.is_file() or file_sha256(corpus) != plan.corpus_sha256:
        raise CareError(f"{corpus}: missing or changed since its documents were encoded (sha256 differs from plan.json); "
                        "pass the original corpus with --corpus, or rebuild into a new --output folder")
    began = time.perf_counter()
    index_dir = folder / INDEX_DIR
    norms = NormRange()
    if options.backend == "faiss":
        index_settings = _merge_faiss(folder, plan, options.index, dim, index_dir, norms)
    else:
        index_settings = _merge_milvus(folder, plan, options, dim, index_dir, norms)
    from care.index.docstore import build_docstore

    build_docstore(folder / DOCSTORE_FILE, iter_numbered_documents(corpus), source=str(corpus))
    files = record_files(folder, [PLAN_FILE, DOCSTORE_FILE, *files_under(folder, INDEX_DIR)])
    manifest = IndexManifest(
        model=plan.model, model_identity=plan.model_identity, encoder_fingerprint=plan.encoder_fingerprint,
        corpus=plan.corpus, corpus_sha256=plan.corpus_sha256, instruction=plan.instruction, dim=dim,
        n_docs=plan.n_docs, backend=options.backend, index=index_settings,
        shards=[r.to_dict() for r in records if r is not None],
        encode_seconds=round(sum(r.seconds for r in records if r is not None), 3),
        files=files, norm_range=norms.as_list(),
    )
    manifest.save(folder)
    logger.info("merged %d vectors (%d-d) into a %s index in %.1fs: %s", plan.n_docs, dim, options.backend,
                time.perf_counter() - began, folder)
    return manifest


def check_shard_files(folder: Path, records: list[ShardRecord]) -> None:
    """Check each finished shard's ``.npy`` against the size and SHA-256 its record holds (records of older builds
    hold none and are skipped).

    Raises:
        IndexDamagedError: a shard file changed since it was finished, naming it and the command that re-encodes it.
    """
    for record in records:
        if not record.sha256:
            continue
        path = shard_paths(folder, record.shard, record.num_shards)["vectors"]
        found = FileChecksum.of(path)
        if found != FileChecksum(record.sha256, record.file_bytes):
            raise IndexDamagedError(
                f"{path} is damaged (corrupt or truncated): {found.bytes} bytes, sha256 {found.sha256}, but its record "
                f"holds {record.file_bytes} bytes, sha256 {record.sha256}; delete it and its .json record and run "
                f"'care index build --shard {record.shard}/{record.num_shards}' with the original --model, --corpus "
                f"and --output {folder} to encode it again")


class NormRange:
    """The smallest and largest L2 norm of the vectors seen by :meth:`update` (recorded in the manifest)."""

    def __init__(self) -> None:
        self.low, self.high = float("inf"), float("-inf")

    def update(self, block: np.ndarray) -> np.ndarray:
        """Take ``block``'s row norms into account; returns ``block`` unchanged."""
        if len(block):
            norms = np.linalg.norm(block, axis=1)
            self.low, self.high = min(self.low, float(norms.min())), max(self.high, float(norms.max()))
        return block

    def as_list(self) -> list[float]:
        """``[low, high]``, or ``[]`` when no vector was seen."""
        return [self.low, self.high] if self.low <= self.high else []


def iter_shard_vectors(folder: Path, plan: BuildPlan, block_rows: int = MERGE_BLOCK_ROWS) -> Iterator[np.ndarray]:
    """float32 blocks of every shard's vectors, in row order."""
    for i in range(plan.num_shards):
        vectors = np.load(shard_paths(folder, i, plan.num_shards)["vectors"], mmap_mode="r")
        for start in range(0, len(vectors), block_rows):
            yield np.asarray(vectors[start : start + block_rows], dtype=np.float32)


def _merge_faiss(folder: Path, plan: BuildPlan, config: IndexConfig, dim: int, index_dir: Path,
                 norms: NormRange) -> dict[str, Any]:
    from care.index.faiss_index import build_index

    index = build_index(config, dim)
    for block in iter_shard_vectors(folder, plan):
        index.add(norms.update(block))
    index.save(index_dir)
    return {"type": "faiss", **config.to_dict()}


def _merge_milvus(folder: Path, plan: BuildPlan, options: BuildOptions, dim: int, index_dir: Path,
                  norms: NormRange) -> dict[str, Any]:
    from care.index.milvus import MilvusIndex

    uri = options.milvus_uri or str((folder / "milvus.db").resolve())
    index = MilvusIndex.create(uri, options.milvus_collection, dim, overwrite=True)
    for block in iter_shard_vectors(folder, plan):
        index.add(norms.update(block))
    index.save(index_dir)
    return index.settings()


def build(options: BuildOptions, *, shard: tuple[int, int] | None = None, merge: bool | None = None) -> IndexManifest | None:
    """``care index build``: encode (the given shard, the torchrun rank's shard, or all) then merge.

    Args:
        shard: ``(i, N)`` to encode only shard ``i`` of ``N``.
        merge: True = only merge (every shard must be finished); None = encode, then merge if every
            shard is finished and no other process is merging; False = never merge.
    Returns:
        The manifest when this call merged (or found the index already merged), else None.
    """
    if merge is True:
        with merge_lock(options.output) as held:
            if not held:
                raise CareError(f"{options.output}: another process is merging this index right now")
            return merge_shards(options)
    plan = encode_shards(options, shard)
    if merge is False:
        return None
    missing = unfinished_shards(options.output, plan)
    if missing:
        logger.info("%d shard(s) still unfinished; the process that finishes the last one merges", len(missing))
        return None
    with merge_lock(options.output) as held:
        if not held:
            logger.info("another process is merging %s", options.output)
            return None
        if _already_merged(options.output, plan):
            logger.info("%s is already merged", options.output)
            return IndexManifest.load(options.output)
        return merge_shards(options)


def _already_merged(folder: Path, plan: BuildPlan) -> bool:
    if not (folder / MANIFEST_FILE).is_file():
        return False
    try:
        manifest = IndexManifest.load(folder)
    except CareError:
        return False
    return manifest.encoder_fingerprint == plan.encoder_fingerprint and manifest.corpus_sha256 == plan.corpus_sha256
