"""Open a finished index folder (manifest + vector index + document store), checking it end to end.

The service calls :func:`open_index_folder` at start-up, so a missing, truncated, damaged or inconsistent
file is reported then — naming the file and the command that rebuilds it — and never at the first
query. What is checked depends on ``verify`` (:data:`~care.index.integrity.VERIFY_MODES`):

* ``full``: every file's size and SHA-256 against ``manifest.json`` (before a byte of it is parsed), then the
  content checks below;
* ``quick``: the sizes, then the content checks: SQLite's ``quick_check`` of the document store, and the
  stored vectors (of indexes that hold them exactly: flat, HNSW, IVF-Flat, IVF-PQ with ``refine=flat``)
  finite with norms inside the range the build recorded; a Milvus collection's row count against the manifest;
* ``off``: only the cross-checks every open does (widths, vector and document counts).

A manifest from before checksums existed (format version 1) is opened with a warning and the content checks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from care.errors import CareError
from care.index.base import SearchIndex
from care.index.docstore import DocumentStore
from care.index.integrity import DEFAULT_VERIFY, OFF, IndexDamagedError, check_verify_mode, rebuild_hint, verify_files
from care.index.manifest import DOCSTORE_FILE, INDEX_DIR, MANIFEST_FILE, IndexManifest

logger = logging.getLogger(__name__)

#: Relative slack on the recorded norm range: the stored float32 vectors are the very values whose norms the
#: build took, so only summation order differs (~1e-7); a flipped exponent or high mantissa bit is far outside.
NORM_TOLERANCE = 1e-3


@dataclass
class IndexBundle:
    """What ``care serve`` searches: the manifest, the vector index and the document store."""

    folder: Path
    manifest: IndexManifest
    index: SearchIndex
    docstore: DocumentStore

    @property
    def dim(self) -> int:
        return self.manifest.dim


def load_vector_index(folder: Path, manifest: IndexManifest) -> Any:
    """Load the manifest's backend from ``folder/index``; any read failure becomes a clear CareError."""
    index_dir = folder / INDEX_DIR
    if manifest.backend == "milvus":
        from care.index.milvus import MilvusIndex

        return MilvusIndex.load(index_dir)
    if manifest.backend != "faiss":
        raise CareError(f"{folder}/manifest.json: unknown backend {manifest.backend!r} (expected faiss or milvus)")
    from care.index.faiss_index import load_index

    try:
        return load_index(index_dir)
    except CareError:
        raise
    except Exception as exc:  # faiss raises RuntimeError on truncated / corrupt files; json errors too
        raise CareError(f"{index_dir}: the vector index cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                        "it is corrupt or truncated — rebuild it with 'care index build --merge'") from None


def check_stored_vectors(folder: Path, manifest: IndexManifest, index: Any) -> None:
    """Check the vectors ``index`` holds exactly: finite, with norms inside the manifest's ``norm_range``
    (:data:`NORM_TOLERANCE` of slack; only finiteness when the manifest predates it).

    Raises:
        IndexDamagedError: a vector outside, naming the index file and the rebuild command.
    """
    blocks = index.stored_vector_blocks() if hasattr(index, "stored_vector_blocks") else None
    if blocks is None:
        logger.info("%s: the %s index holds no exact vectors to read back; its checksum is its check", folder,
                    manifest.index.get("type", manifest.backend))
        return
    low, high = (manifest.norm_range[0] * (1 - NORM_TOLERANCE), manifest.norm_range[1] * (1 + NORM_TOLERANCE)) \
        if len(manifest.norm_range) == 2 else (0.0, np.inf)
    checked = 0
    for block in blocks:
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.linalg.norm(block, axis=1)
        bad = ~np.isfinite(norms) | (norms < low) | (norms > high)
        if bad.any():
            worst = float(norms[np.argmax(bad)])
            raise IndexDamagedError(
                f"{folder / INDEX_DIR} is damaged: a stored vector has norm {worst:.6g}, outside the range "
                f"[{low:.6g}, {high:.6g}] of the vectors the build indexed; {rebuild_hint(folder)}")
        checked += len(block)
    logger.info("%s: %d stored vectors are finite with norms in [%.6g, %.6g]", folder, checked, low, high)


def check_milvus_rows(folder: Path, manifest: IndexManifest, index: Any) -> None:
    """A Milvus collection must hold the manifest's number of rows (its vectors live outside the folder).

    Raises:
        IndexDamagedError: another row count, naming the collection and the rebuild command.
    """
    rows = index.stored_rows()
    if rows != manifest.n_docs:
        raise IndexDamagedError(
            f"Milvus collection {index.collection!r} at {index.uri} holds {rows} rows but {folder / MANIFEST_FILE} "
            f"lists {manifest.n_docs} documents; rebuild it with 'care index build --merge --backend milvus "
            f"--output {folder}'")


def open_index_folder(folder: str | Path, *, verify: str = DEFAULT_VERIFY) -> IndexBundle:
    """Open and cross-check an index folder built by ``care index build``, verifying its files at level
    ``verify`` (module docstring).

    Raises:
        CareError: missing folder or manifest, unreadable index or store, or counts / widths that
            disagree with the manifest; IndexDamagedError: a file that differs from what the build recorded,
            a damaged document store or stored vector.
    """
    folder = Path(folder)
    check_verify_mode(verify)
    manifest = IndexManifest.load(folder)
    if verify != OFF:
        if manifest.files:
            verify_files(folder, manifest.files, verify)
        else:
            logger.warning("%s records no file checksums (format version %d: written before care recorded them, or "
                           "not by 'care index build'): its files cannot be compared with what the build wrote, only "
                           "checked for the damage SQLite and the vector norms reveal; %s to add them",
                           folder / MANIFEST_FILE, manifest.format_version, rebuild_hint(folder))
    index = load_vector_index(folder, manifest)
    if index.dim != manifest.dim:
        raise CareError(f"{folder}: the vector index is {index.dim}-d but manifest.json says {manifest.dim}-d; rebuild it")
    if index.ntotal != manifest.n_docs:
        raise CareError(f"{folder}: the vector index holds {index.ntotal} vectors but manifest.json lists {manifest.n_docs} documents; rebuild it")
    docstore = DocumentStore(folder / DOCSTORE_FILE)
    if len(docstore) != manifest.n_docs:
        raise CareError(f"{folder / DOCSTORE_FILE}: {len(docstore)} documents but manifest.json lists {manifest.n_docs}; rebuild it")
    if verify != OFF:
        docstore.check()
        if manifest.backend == "milvus":
            check_milvus_rows(folder, manifest, index)
        else:
            check_stored_vectors(folder, manifest, index)
    logger.info("opened %s: %d documents, %d-d, %s", folder, manifest.n_docs, manifest.dim, manifest.index.get("type", manifest.backend))
    return IndexBundle(folder, manifest, index, docstore)
