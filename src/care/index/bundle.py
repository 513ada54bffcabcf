"""Open a finished index folder (manifest + vector index + document store), checking it end to end.

The service calls :func:`open_index_folder` at start-up, so a missing, truncated or inconsistent
file is reported then — naming the file and the command that rebuilds it — and never at the first
query.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.errors import CareError
from care.index.base import SearchIndex
from care.index.docstore import DocumentStore
from care.index.manifest import DOCSTORE_FILE, INDEX_DIR, IndexManifest

logger = logging.getLogger(__name__)


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


def open_index_folder(folder: str | Path) -> IndexBundle:
    """Open and cross-check an index folder built by ``care index build``.

    Raises:
        CareError: missing folder or manifest, unreadable index or store, or counts / widths that
            disagree with the manifest.
    """
    folder = Path(folder)
    manifest = IndexManifest.load(folder)
    index = load_vector_index(folder, manifest)
    if index.dim != manifest.dim:
        raise CareError(f"{folder}: the vector index is {index.dim}-d but manifest.json says {manifest.dim}-d; rebuild it")
    if index.ntotal != manifest.n_docs:
        raise CareError(f"{folder}: the vector index holds {index.ntotal} vectors but manifest.json lists {manifest.n_docs} documents; rebuild it")
    docstore = DocumentStore(folder / DOCSTORE_FILE)
    if len(docstore) != manifest.n_docs:
        raise CareError(f"{folder / DOCSTORE_FILE}: {len(docstore)} documents but manifest.json lists {manifest.n_docs}; rebuild it")
    logger.info("opened %s: %d documents, %d-d, %s", folder, manifest.n_docs, manifest.dim, manifest.index.get("type", manifest.backend))
    return IndexBundle(folder, manifest, index, docstore)
