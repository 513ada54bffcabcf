"""Single-query encoding latency, measured side by side.

Every model encodes the same query in turn (query by query, round by round), so load on a shared
machine affects all of them alike and their ratio is meaningful even when absolute times are not.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence

from care.encoders.base import Encoder

#: Queries each model encodes once before timing (first-call allocations, lazy initialisation).
WARMUP_QUERIES = 2


def measure_latency(models: Mapping[str, Encoder], queries: Sequence[str], rounds: int,
                    instruction: str | None) -> dict[str, float]:
    """Median milliseconds to encode one query (batch 1) per model, interleaved query by query.

    Args:
        models: label -> encoder (its query side is timed).
        queries: the timed queries; ``rounds`` passes over them.
        instruction: the task instruction every query is encoded with.
    Returns:
        label -> median latency in ms over ``rounds * len(queries)`` calls.
    """
    for model in models.values():
        model.encode_queries(list(queries[:WARMUP_QUERIES]), instruction=instruction)
    times: dict[str, list[float]] = {label: [] for label in models}
    for _ in range(rounds):
        for query in queries:
            for label, model in models.items():
                start = time.perf_counter()
                model.encode_queries([query], instruction=instruction, batch_size=1)
                times[label].append((time.perf_counter() - start) * 1e3)
    return {label: statistics.median(t) for label, t in times.items()}
