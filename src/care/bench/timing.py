"""Phase timers for a benchmark run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("load_s", "encode_queries_s", "encode_documents_s", "index_s", "search_s", "metrics_s")
ENCODING_PHASES = ("encode_queries_s", "encode_documents_s")


class PhaseTimer:
    """Accumulates wall-clock seconds per phase; :meth:`summary` adds ``total_s`` and the share of
    wall time spent outside encoding."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._start = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def summary(self) -> dict[str, float]:
        total = time.perf_counter() - self._start
        encoding = sum(self.seconds[p] for p in ENCODING_PHASES)
        out = {k: round(v, 4) for k, v in self.seconds.items()}
        out["total_s"] = round(total, 4)
        out["outside_encoding_share"] = round(1.0 - encoding / total, 4) if total > 0 else 0.0
        return out
