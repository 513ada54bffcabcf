"""Side-by-side single-query latency: every model times every query, medians per model."""

from __future__ import annotations

import time

import numpy as np

from care.bench.latency import WARMUP_QUERIES, measure_latency


class SleepyEncoder:
    """Sleeps a fixed time per call and records what it was asked."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.calls = seconds, []

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        self.calls.append((list(texts), instruction, batch_size))
        time.sleep(self.seconds)
        return np.zeros((len(texts), 2), dtype=np.float32)


def test_each_model_times_each_query_at_batch_one() -> None:
    fast, slow = SleepyEncoder(0.001), SleepyEncoder(0.02)
    queries = ["头痛", "发烧", "咳嗽"]
    result = measure_latency({"fast": fast, "slow": slow}, queries, rounds=2, instruction="Instruct")
    assert set(result) == {"fast", "slow"}
    assert result["slow"] >= 20.0 > result["fast"] >= 1.0
    timed = slow.calls[1:]  # the first call is the warm-up
    assert slow.calls[0][0] == queries[:WARMUP_QUERIES]
    assert [c[0] for c in timed] == [[q] for q in queries] * 2
    assert all(c[1] == "Instruct" and c[2] == 1 for c in timed)
