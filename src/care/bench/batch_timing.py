"""Timing of batched calls: the median wall time of a call, and documents encoded per second.

Single-query latency is :mod:`care.bench.latency`'s (interleaved, self-checked, stable medians); a batch
needs only the simpler measurement here: a fixed number of timed calls after a warm-up, or one timed
pass over a sample of documents.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from care.encoders.base import Encoder


def median_call_seconds(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` timed calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def documents_per_second(encoder: Encoder, documents: Sequence[str], batch_size: int = 32) -> float:
    """Documents per second of one timed ``encode_documents`` pass over ``documents`` (no warm-up: the
    first pass, as a corpus encoding meets it)."""
    started = time.perf_counter()
    encoder.encode_documents(documents, batch_size=batch_size)
    return len(documents) / (time.perf_counter() - started)
