"""An encoder whose cost is known: deterministic hashed-character vectors plus a sleep that emulates a model
encoding ``texts_per_s`` texts a second.

Measures the harness's own time against a known encode cost (``python -m benchmarks.bench_baselines``'s
overhead section): whatever a run spends beyond ``texts / texts_per_s`` is loading, hashing, caching, index
build, search and metrics. Implements :class:`care.encoders.base.Encoder`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

#: Default width of the hashed-character vectors.
DEFAULT_DIM = 384
#: Multiplier of the character hash (Knuth's multiplicative hashing constant).
HASH_MULTIPLIER = 2654435761


class EmulatedEncoder:
    """Hashed-character vectors + a sleep of ``1 / texts_per_s`` per text, standing in for a model of that
    throughput. ``encoded`` counts the texts encoded so far (a fully cached rerun adds none)."""

    name = "emulated-encoder"

    def __init__(self, texts_per_s: float, dim: int = DEFAULT_DIM) -> None:
        self.texts_per_s = texts_per_s
        self._dim = dim
        self.encoded = 0

    @property
    def fingerprint(self) -> str:
        return f"emulated-{self._dim}-{self.texts_per_s}"

    @property
    def dim(self) -> int:
        return self._dim

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
            np.add.at(out[i], (codes * HASH_MULTIPLIER) % self._dim, 1.0)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        remaining = len(texts) / self.texts_per_s - (time.perf_counter() - started)
        if remaining > 0:
            time.sleep(remaining)
        self.encoded += len(texts)
        return out

    def encode_queries(self, texts: Sequence[str], *, instruction: str | None = None, batch_size: int = 32,
                       show_progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (the instruction is ignored) at the emulated cost."""
        return self._embed(texts)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """Embed ``texts`` at the emulated cost."""
        return self._embed(texts)
