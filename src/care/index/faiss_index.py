"""FAISS implementations of :class:`~care.index.base.SearchIndex` (inner product, i.e. cosine on
L2-normalised vectors): exact ``IndexFlatIP``, ``IndexHNSWFlat``, ``IndexIVFFlat`` and ``IndexIVFPQ`` (4-bit codes:
``IndexIVFPQFastScan``; optionally wrapped in ``IndexRefine``: PQ proposes ``k * refine_k_factor`` candidates,
exact or 8-bit copies re-rank them).

IVF indexes must be trained before vectors are added. To let callers stream vectors batch by batch
without a separate training pass, :class:`FaissIndex` buffers the first ``config.train_size``
vectors, trains on them, then adds them; an index that received fewer vectors is trained on what
it has the first time it is searched or saved (``nlist`` is capped so each list gets enough points).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import faiss
import numpy as np

from care.data.io import atomic_write, write_json
from care.errors import CareError, DimensionMismatchError
from care.index.config import FAST_SCAN_NBITS, TRAIN_POINTS_PER_LIST, IndexConfig

logger = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
META_FILE = "index.json"
#: Rows per block when the stored vectors are read back for a check (4 MiB of 1024-d float32).
CHECK_BLOCK_ROWS = 1024


def _as_matrix(vectors: np.ndarray, dim: int, what: str) -> np.ndarray:
    arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if arr.ndim != 2:
        raise CareError(f"{what} must be a 2-D (n, dim) array, got shape {arr.shape}")
    if arr.shape[1] != dim:
        raise DimensionMismatchError(f"{what} have dimension {arr.shape[1]} but the index has dimension {dim}")
    return arr


class FaissIndex:
    """A FAISS maximum-inner-product index built from an :class:`IndexConfig`."""

    def __init__(self, dim: int, config: IndexConfig | None = None) -> None:
        if dim < 1:
            raise CareError(f"index dimension must be >= 1, got {dim}")
        self.config = config or IndexConfig()
        self._dim = int(dim)
        self._pending: list[np.ndarray] = []
        self._quantizer: faiss.Index | None = None
        self._parts: tuple[faiss.Index, ...] = ()
        self._n_pending = 0
        self._index: faiss.Index | None = None if self.config.is_trained_type else self._make_untrained(0)

    # -- construction -------------------------------------------------------------------------
    def _make_untrained(self, n_train: int) -> faiss.Index:
        cfg, dim = self.config, self._dim
        if cfg.type == "flat":
            return faiss.IndexFlatIP(dim)
        if cfg.type == "hnsw":
            index = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = cfg.ef_construction
            index.hnsw.efSearch = cfg.ef_search
            return index
        nlist = max(1, min(cfg.nlist, n_train // TRAIN_POINTS_PER_LIST))
        if nlist < cfg.nlist:
            logger.info("IVF: %d training vectors, using nlist=%d instead of %d", n_train, nlist, cfg.nlist)
        quantizer = faiss.IndexFlatIP(dim)
        if cfg.type == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            if dim % cfg.pq_m:
                raise CareError(f"ivfpq: pq_m={cfg.pq_m} must divide the dimension {dim}")
            if cfg.pq_nbits == FAST_SCAN_NBITS:  # 4-bit codes scanned with SIMD lookups: many lists per query, cheaply
                index = faiss.IndexIVFPQFastScan(quantizer, dim, nlist, cfg.pq_m, cfg.pq_nbits, faiss.METRIC_INNER_PRODUCT)
            else:
                index = faiss.IndexIVFPQ(quantizer, dim, nlist, cfg.pq_m, cfg.pq_nbits, faiss.METRIC_INNER_PRODUCT)
        index.nprobe = min(cfg.nprobe, nlist)
        self._quantizer = quantizer  # the IVF index does not own its quantizer: keep it alive
        if cfg.refine == "none":
            return index
        exact = (faiss.IndexFlatIP(dim) if cfg.refine == "flat"
                 else faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT))
        refined = faiss.IndexRefine(index, exact)
        refined.k_factor = float(cfg.refine_k_factor)
        self._parts = (index, exact)  # IndexRefine does not own the indexes it wraps: keep them alive
        return refined

    def _flush_pending(self) -> None:
        """Train an IVF index on the buffered vectors and add them."""
        if not self._pending:
            return
        data = np.concatenate(self._pending)
        self._pending, self._n_pending = [], 0
        if self._index is None:
            index = self._make_untrained(len(data))
            min_points = faiss.extract_index_ivf(index).nlist
            if len(data) < min_points:
                raise CareError(f"IVF index needs at least {min_points} vectors to train, got {len(data)}")
            index.train(data[: self.config.train_size])
            self._index = index
        self._index.add(data)

    # -- SearchIndex --------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def ntotal(self) -> int:
        return (self._index.ntotal if self._index is not None else 0) + self._n_pending

    @property
    def needs_training(self) -> bool:
        return self._index is None

    @property
    def native(self) -> faiss.Index | None:
        """The FAISS object itself (None while an IVF index waits for its training vectors): search parameters
        (``hnsw.efSearch``, the IVF part's ``nprobe``, a refine index's ``k_factor``) can be set on it in place."""
        return self._index

    def train(self, vectors: np.ndarray) -> None:
        if self._index is not None:
            return
        arr = _as_matrix(vectors, self._dim, "training vectors")
        index = self._make_untrained(len(arr))
        index.train(arr)
        self._index = index

    def add(self, vectors: np.ndarray) -> None:
        arr = _as_matrix(vectors, self._dim, "vectors")
        if self._index is not None and not self._pending:
            self._index.add(arr)
            return
        self._pending.append(arr.copy())
        self._n_pending += len(arr)
        if self._n_pending >= self.config.train_size:
            self._flush_pending()

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        arr = _as_matrix(queries, self._dim, "query vectors")
        self._flush_pending()
        if self._index is None or self._index.ntotal == 0:
            raise CareError("search on an empty index: add document vectors first")
        k = max(1, min(int(k), self._index.ntotal))
        scores, ids = self._index.search(arr, k)
        return scores, ids.astype(np.int64)

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        self._flush_pending()
        if self._index is None:
            raise CareError("cannot save an empty untrained index")
        with atomic_write(folder / INDEX_FILE, "wb") as fh:  # streamed: no in-memory copy of a GB-sized index
            faiss.write_index(self._index, faiss.PyCallbackIOWriter(fh.write))
        write_json(folder / META_FILE, {"dim": self._dim, "ntotal": int(self._index.ntotal), "config": self.config.to_dict()})

    @classmethod
    def load(cls, folder: str | Path) -> FaissIndex:
        """Load an index written by :meth:`save`."""
        return load_index(folder)

    def stored_vector_blocks(self, block_rows: int = CHECK_BLOCK_ROWS) -> Iterator[np.ndarray] | None:
        """The float32 vectors the index holds exactly, as ``(rows, dim)`` blocks (each a copy, so memory stays
        bounded by one block and a block outlives the index safely), or None for an index that holds none exactly
        (PQ codes, 8-bit copies) or none yet.

        Flat, HNSW (its flat storage), IVF-Flat (its inverted lists, list by list) and IVF-PQ re-ranked by
        ``refine=flat`` (the flat copies) hold them: the service checks their norms at start-up.
        """
        index = self._index
        if index is None:
            return None
        index = faiss.downcast_index(index)
        if isinstance(index, faiss.IndexHNSW):
            index = faiss.downcast_index(index.storage)
        elif isinstance(index, faiss.IndexRefine):
            index = faiss.downcast_index(index.refine_index)
        if isinstance(index, faiss.IndexFlat):
            return _flat_vectors(self, index, block_rows)
        if isinstance(index, faiss.IndexIVFFlat):
            return _inverted_list_vectors(self, index, block_rows)
        return None


def _flat_vectors(owner: FaissIndex, flat: faiss.IndexFlat, block_rows: int) -> Iterator[np.ndarray]:
    """Copies of ``flat``'s vectors in blocks of ``block_rows`` (``owner``, which owns ``flat``, is kept alive while
    the view into its memory is read)."""
    n, dim = flat.ntotal, owner.dim
    view = faiss.rev_swig_ptr(flat.get_xb(), n * dim).reshape(n, dim)
    for start in range(0, n, block_rows):
        yield np.array(view[start : start + block_rows])


def _inverted_list_vectors(owner: FaissIndex, index: faiss.IndexIVFFlat, block_rows: int) -> Iterator[np.ndarray]:
    """Copies of the inverted lists' raw float32 vectors, list by list in blocks of at most ``block_rows``
    (``owner`` kept alive while they are read)."""
    lists = index.invlists
    for number in range(index.nlist):
        size = lists.list_size(number)
        if size:
            raw = faiss.rev_swig_ptr(lists.get_codes(number), size * lists.code_size)
            vectors = raw.view(np.float32).reshape(size, owner.dim)
            for start in range(0, size, block_rows):
                yield np.array(vectors[start : start + block_rows])


def build_index(config: IndexConfig, dim: int) -> FaissIndex:
    """Create an empty index of the configured type for ``dim``-dimensional vectors."""
    return FaissIndex(dim, config)


def load_index(folder: str | Path) -> FaissIndex:
    """Load a :class:`FaissIndex` saved with :meth:`FaissIndex.save` (``index.faiss`` + ``index.json``)."""
    import json

    folder = Path(folder)
    meta_path, index_path = folder / META_FILE, folder / INDEX_FILE
    if not meta_path.is_file() or not index_path.is_file():
        raise CareError(f"{folder}: not a saved index (expected {INDEX_FILE} and {META_FILE})")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    config = IndexConfig.from_dict(meta["config"])
    obj = FaissIndex(int(meta["dim"]), config)
    index = faiss.read_index(str(index_path))  # read straight from the file (no second copy in memory)
    if index.d != obj.dim:
        raise DimensionMismatchError(f"{index_path}: stored index has dimension {index.d}, manifest says {obj.dim}")
    if config.type == "hnsw":
        index.hnsw.efSearch = config.ef_search
    elif config.is_trained_type:
        faiss.extract_index_ivf(index).nprobe = min(config.nprobe, faiss.extract_index_ivf(index).nlist)
        if config.refine != "none":
            index.k_factor = float(config.refine_k_factor)
    obj._index = index
    return obj
