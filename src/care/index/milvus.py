"""A Milvus collection behind the :class:`~care.index.base.SearchIndex` protocol, for corpora beyond one machine.

``pymilvus.MilvusClient(uri)`` talks to a Milvus server (``http://host:19530``) or, when ``uri`` is a
local ``.db`` file path, to milvus-lite — the embedded edition with the same client API, which the
tests use. Vectors are stored with their row number as the int64 primary key (so search results
map to the document store exactly like FAISS ids) and searched by inner product (cosine on
L2-normalised vectors). Install with ``pip install 'care-retrieval[milvus]'``.

``save(folder)`` writes ``milvus.json`` (URI, collection, dimension, count): the vectors themselves
live in Milvus; a relative milvus-lite path is resolved against the index folder's parent.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from care.data.io import write_json
from care.errors import CareError, DimensionMismatchError

logger = logging.getLogger(__name__)

MILVUS_FILE = "milvus.json"
ID_FIELD = "id"
VECTOR_FIELD = "vector"
METRIC = "IP"
#: Rows per insert request (Milvus limits the size of one gRPC message).
INSERT_BATCH_ROWS = 5_000


def _client(uri: str) -> Any:
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CareError("the Milvus backend needs pymilvus: pip install 'care-retrieval[milvus]'") from exc
    return MilvusClient(uri)


def _is_local(uri: str) -> bool:
    return "://" not in uri


class MilvusIndex:
    """Maximum-inner-product search in one Milvus collection; ids are row numbers ``0 .. ntotal-1``."""

    def __init__(self, uri: str, collection: str, dim: int, *, ntotal: int | None = None) -> None:
        self.uri, self.collection, self._dim = uri, collection, int(dim)
        self._client = _client(uri)
        if not self._client.has_collection(collection):
            raise CareError(f"Milvus at {uri} has no collection {collection!r}; rebuild the index with 'care index build --backend milvus'")
        self._ntotal = ntotal if ntotal is not None else int(self._client.get_collection_stats(collection).get("row_count", 0))

    @classmethod
    def create(cls, uri: str, collection: str, dim: int, *, overwrite: bool = False) -> MilvusIndex:
        """Create an empty collection (``overwrite`` drops an existing one of that name)."""
        if _is_local(uri):
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        client = _client(uri)
        if client.has_collection(collection):
            if not overwrite:
                raise CareError(f"Milvus at {uri} already has a collection {collection!r}; choose another name or overwrite it")
            client.drop_collection(collection)
        client.create_collection(collection, dimension=int(dim), metric_type=METRIC, auto_id=False,
                                 primary_field_name=ID_FIELD, vector_field_name=VECTOR_FIELD, id_type="int")
        return cls(uri, collection, dim, ntotal=0)

    # -- SearchIndex --------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def ntotal(self) -> int:
        return self._ntotal

    @property
    def needs_training(self) -> bool:
        return False

    def train(self, vectors: np.ndarray) -> None:
        """Milvus builds its own index structures; nothing to train."""

    def _matrix(self, vectors: np.ndarray, what: str) -> np.ndarray:
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2:
            raise CareError(f"{what} must be a 2-D (n, dim) array, got shape {arr.shape}")
        if arr.shape[1] != self._dim:
            raise DimensionMismatchError(f"{what} have dimension {arr.shape[1]} but the collection has dimension {self._dim}")
        return arr

    def add(self, vectors: np.ndarray) -> None:
        arr = self._matrix(vectors, "vectors")
        for start in range(0, len(arr), INSERT_BATCH_ROWS):
            block = arr[start : start + INSERT_BATCH_ROWS]
            rows = [{ID_FIELD: self._ntotal + start + i, VECTOR_FIELD: vec.tolist()} for i, vec in enumerate(block)]
            self._client.insert(self.collection, rows)
        self._ntotal += len(arr)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        arr = self._matrix(queries, "query vectors")
        if self._ntotal == 0:
            raise CareError("search on an empty index: add document vectors first")
        k = max(1, min(int(k), self._ntotal))
        results = self._client.search(self.collection, data=arr.tolist(), limit=k, output_fields=[],
                                      search_params={"metric_type": METRIC})
        scores = np.full((len(arr), k), -np.inf, dtype=np.float32)
        ids = np.full((len(arr), k), -1, dtype=np.int64)
        for row, hits in enumerate(results):
            for col, hit in enumerate(list(hits)[:k]):
                scores[row, col] = float(hit["distance"])
                ids[row, col] = int(hit["id"])
        return scores, ids

    def stored_rows(self) -> int:
        """The row count Milvus reports for the collection now (not the count ``milvus.json`` recorded)."""
        return int(self._client.get_collection_stats(self.collection).get("row_count", 0))

    def settings(self) -> dict[str, Any]:
        return {"type": "milvus", "uri": self.uri, "collection": self.collection}

    def save(self, folder: str | Path) -> None:
        """Flush the collection and write ``milvus.json`` pointing at it."""
        folder = Path(folder)
        self._client.flush(self.collection)
        uri = self.uri
        if _is_local(uri):
            try:
                uri = Path(uri).resolve().relative_to(folder.resolve().parent).as_posix()
            except ValueError:
                uri = str(Path(uri).resolve())
        write_json(folder / MILVUS_FILE, {"uri": uri, "collection": self.collection, "dim": self._dim, "ntotal": self._ntotal})

    @classmethod
    def load(cls, folder: str | Path) -> MilvusIndex:
        folder = Path(folder)
        path = folder / MILVUS_FILE
        if not path.is_file():
            raise CareError(f"{path} is missing: not a Milvus index folder")
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            uri, collection, dim, ntotal = meta["uri"], meta["collection"], int(meta["dim"]), int(meta["ntotal"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CareError(f"{path}: corrupt ({exc}); rebuild the index") from None
        if _is_local(uri) and not Path(uri).is_absolute():
            uri = str(folder.resolve().parent / uri)
        if _is_local(uri) and not Path(uri).exists():
            raise CareError(f"milvus-lite database {uri} (named in {path}) is missing; rebuild the index")
        return cls(uri, collection, dim, ntotal=ntotal)

    def close(self) -> None:
        self._client.close()
