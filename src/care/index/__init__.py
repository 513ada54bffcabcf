"""Vector search behind one protocol (:class:`SearchIndex`), with FAISS implementations.

``build_index(IndexConfig(type="flat"), dim)`` gives an exact inner-product index; ``hnsw``,
``ivf`` (IVF-Flat) and ``ivfpq`` trade exactness for speed and memory. Indexes save to and load
from a folder (``index.faiss`` + ``index.json``), so the production index of a later stage is
the same object the benchmark harness uses.
"""

from care.index.base import SearchIndex
from care.index.config import INDEX_TYPES, IndexConfig
from care.index.faiss_index import FaissIndex, build_index, load_index

__all__ = ["INDEX_TYPES", "FaissIndex", "IndexConfig", "SearchIndex", "build_index", "load_index"]
