"""The :class:`SearchIndex` protocol: add vectors, search by inner product, save and load."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class SearchIndex(Protocol):
    """A maximum-inner-product index over row vectors numbered ``0 .. ntotal-1`` in insertion order.

    Vectors are expected L2-normalised, so scores are cosine similarities.
    """

    @property
    def dim(self) -> int: ...

    @property
    def ntotal(self) -> int:
        """Number of vectors added so far."""
        ...

    @property
    def needs_training(self) -> bool:
        """True while the index must see training vectors (:meth:`train`) before :meth:`add`."""
        ...

    def train(self, vectors: np.ndarray) -> None:
        """Fit the index's quantisers on a sample (a no-op for exact / graph indexes)."""
        ...

    def add(self, vectors: np.ndarray) -> None:
        """Append a ``(n, dim)`` float32 batch; ids continue from :attr:`ntotal`."""
        ...

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(scores, ids)``, both ``(n_queries, k)``, best first; missing hits have id ``-1``."""
        ...

    def save(self, folder: str | Path) -> None:
        """Write the index to ``folder`` atomically."""
        ...
