"""Configuration of a FAISS index, as a dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass

from care.config import Config
from care.errors import CareError

#: Supported index types: exact inner product, HNSW graph, IVF with flat lists, IVF with product quantisation.
INDEX_TYPES: tuple[str, ...] = ("flat", "hnsw", "ivf", "ivfpq")

DEFAULT_NLIST = 1024
DEFAULT_NPROBE = 32
DEFAULT_HNSW_M = 32
DEFAULT_EF_CONSTRUCTION = 200
DEFAULT_EF_SEARCH = 128
DEFAULT_PQ_M = 16
DEFAULT_PQ_NBITS = 8
#: Training points per IVF list that FAISS recommends (it warns below ~39).
TRAIN_POINTS_PER_LIST = 40


@dataclass(frozen=True)
class IndexConfig(Config):
    """How to build a :class:`~care.index.faiss_index.FaissIndex` (its fields are the CLI's index options).

    Attributes:
        type: one of :data:`INDEX_TYPES`.
        nlist: IVF coarse clusters (``ivf`` / ``ivfpq``); capped at ``n_train // TRAIN_POINTS_PER_LIST``.
        nprobe: IVF lists visited per query.
        hnsw_m: HNSW neighbours per node.
        ef_construction / ef_search: HNSW beam widths when building / searching.
        pq_m: PQ sub-quantisers (must divide the dimension) for ``ivfpq``.
        pq_nbits: bits per PQ code.
        train_size: vectors sampled to train IVF quantisers (the first ``train_size`` added).
    """

    type: str = "flat"
    nlist: int = DEFAULT_NLIST
    nprobe: int = DEFAULT_NPROBE
    hnsw_m: int = DEFAULT_HNSW_M
    ef_construction: int = DEFAULT_EF_CONSTRUCTION
    ef_search: int = DEFAULT_EF_SEARCH
    pq_m: int = DEFAULT_PQ_M
    pq_nbits: int = DEFAULT_PQ_NBITS
    train_size: int = 100_000

    def __post_init__(self) -> None:
        if self.type not in INDEX_TYPES:
            raise CareError(f"unknown index type {self.type!r}; choose one of {', '.join(INDEX_TYPES)}")
        for name in ("nlist", "nprobe", "hnsw_m", "ef_construction", "ef_search", "pq_m", "pq_nbits", "train_size"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"index option {name} must be >= 1, got {getattr(self, name)}")

    @property
    def is_trained_type(self) -> bool:
        """True for index types that need a training pass (IVF variants)."""
        return self.type in ("ivf", "ivfpq")

