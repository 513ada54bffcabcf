"""Batch timing: the median of timed calls after a warm-up, and documents/s measured against an encoder whose
cost is known (``care.testing.emulated_encoder``)."""

from __future__ import annotations

import numpy as np
import pytest

from care.bench import batch_timing
from care.bench.batch_timing import documents_per_second, median_call_seconds
from care.encoders.base import Encoder
from care.testing.emulated_encoder import EmulatedEncoder


def test_the_median_is_of_the_timed_calls_only(monkeypatch):
    durations = iter([100.0, 1.0, 3.0, 2.0])  # the warm-up call is slow and must not count
    now = [0.0]
    calls = []

    def fn() -> None:
        calls.append(1)
        now[0] += next(durations)

    monkeypatch.setattr(batch_timing.time, "perf_counter", lambda: now[0])
    assert median_call_seconds(fn, repeats=3, warmup=1) == pytest.approx(2.0)
    assert len(calls) == 4


def test_documents_per_second_against_a_known_cost():
    encoder = EmulatedEncoder(texts_per_s=2000.0, dim=16)
    rate = documents_per_second(encoder, ["头痛怎么办"] * 40, batch_size=8)
    assert 0 < rate <= 2000.0 * 1.01  # the sleep makes the emulated cost a floor
    assert encoder.encoded == 40


def test_the_emulated_encoder_is_a_deterministic_encoder():
    encoder = EmulatedEncoder(texts_per_s=1e6, dim=32)
    assert isinstance(encoder, Encoder) and encoder.dim == 32 and "32" in encoder.fingerprint
    queries = encoder.encode_queries(["高血压吃什么药", "失眠"], instruction="ignored")
    documents = encoder.encode_documents(["高血压吃什么药", "失眠"])
    assert queries.shape == (2, 32) and queries.dtype == np.float32
    np.testing.assert_array_equal(queries, documents)
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, rtol=1e-6)
    assert encoder.encoded == 4
