"""Configuration of a FAISS index, as a dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass

from care.config import Config, build
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
#: Re-ranking of IVF-PQ candidates with more exact vectors: none, the full float32 vectors ("flat"),
#: or 8-bit scalar-quantised copies ("sq8": a quarter of flat's memory).
REFINE_TYPES: tuple[str, ...] = ("none", "flat", "sq8")
#: IVF-PQ with 4-bit codes uses FAISS's fast-scan kernels (codes compared with SIMD table lookups).
FAST_SCAN_NBITS = 4
#: Candidates re-ranked per requested hit (k * refine_k_factor are scored by PQ, then re-ranked).
DEFAULT_REFINE_K_FACTOR = 4


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
        pq_nbits: bits per PQ code (4: fast-scan, the fast choice with ``refine``; 8: finer codes).
        train_size: vectors sampled to train IVF quantisers (the first ``train_size`` added).
        refine: ``ivfpq`` only: re-rank PQ's ``k * refine_k_factor`` best candidates with exact inner
            products on stored ``flat`` (float32) or ``sq8`` (8-bit) copies of the vectors.
        refine_k_factor: candidates re-ranked per requested hit.
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
    refine: str = "none"
    refine_k_factor: int = DEFAULT_REFINE_K_FACTOR

    def __post_init__(self) -> None:
        if self.type not in INDEX_TYPES:
            raise CareError(f"unknown index type {self.type!r}; choose one of {', '.join(INDEX_TYPES)}")
        if self.refine not in REFINE_TYPES:
            raise CareError(f"unknown refine {self.refine!r}; choose one of {', '.join(REFINE_TYPES)}")
        if self.refine != "none" and self.type != "ivfpq":
            raise CareError(f"refine={self.refine} re-ranks IVF-PQ candidates; use it with type=ivfpq, not {self.type}")
        for name in ("nlist", "nprobe", "hnsw_m", "ef_construction", "ef_search", "pq_m", "pq_nbits", "train_size",
                     "refine_k_factor"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"index option {name} must be >= 1, got {getattr(self, name)}")

    @property
    def is_trained_type(self) -> bool:
        """True for index types that need a training pass (IVF variants)."""
        return self.type in ("ivf", "ivfpq")

    @classmethod
    def from_options(cls, index_type: str, options: dict[str, str]) -> IndexConfig:
        """From ``--index-type`` and ``--index-option key=value`` strings (text converted by field type).

        Raises:
            ConfigError: an unknown option (the valid ones listed), or a value of the wrong type
                (``nprobe=many``), each naming the option.
        """
        return build(cls, {"type": index_type, **options}, source="--index-option", strings=True, noun="option")
