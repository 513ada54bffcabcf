"""Choosing an index's search settings: recall@k against exact search and one-thread batch-1 latency per setting.

:func:`exact_top_k` is the ground truth over a (memory-mapped) matrix, searched in blocks so memory stays
bounded. A search setting is a dict such as ``{"ef_search": 64}`` or ``{"nprobe": 32, "k_factor": 20}``
(:func:`setting_label` names it), set in place on the FAISS object (:func:`apply_search_setting`).
:func:`sweep_search_settings` measures every setting of one index: recall@k over all queries, then the
latency of each setting with :func:`care.bench.latency.measure_calls` (the settings interleaved in random
order, the first one timed twice as the self-check).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from care.index.faiss_index import FaissIndex

logger = logging.getLogger(__name__)

#: Rows of the matrix searched at a time by :func:`exact_top_k`.
EXACT_BLOCK_ROWS = 100_000


def exact_top_k(vectors: np.ndarray, queries: np.ndarray, k: int,
                block_rows: int = EXACT_BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-``k`` of every query over ``vectors`` (e.g. ``np.load(..., mmap_mode="r")``):
    a flat index per block of ``block_rows`` rows, the blocks' hits merged. Returns ``(scores, row ids)``."""
    import faiss

    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(vectors), block_rows):
        block = np.ascontiguousarray(vectors[start : start + block_rows])
        flat = faiss.IndexFlatIP(block.shape[1])
        flat.add(block)
        s, i = flat.search(queries, k)
        merged_s, merged_i = np.concatenate([best_s, s], 1), np.concatenate([best_i, i + start], 1)
        order = np.argsort(-merged_s, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(merged_s, order, 1), np.take_along_axis(merged_i, order, 1)
    return best_s, best_i


def setting_label(setting: dict[str, Any]) -> str:
    """``"nprobe=16 k_factor=4"`` (``"exact"`` for no setting)."""
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "exact"


def apply_search_setting(native: Any, setting: dict[str, Any]) -> None:
    """Set ``ef_search`` (HNSW), ``nprobe`` (IVF) and ``k_factor`` (a refine index) on the FAISS object ``native``.

    Raises:
        ValueError: a key that is none of these.
    """
    import faiss

    for key, value in setting.items():
        if key == "ef_search":
            native.hnsw.efSearch = value
        elif key == "nprobe":
            faiss.extract_index_ivf(native).nprobe = value
        elif key == "k_factor":
            native.k_factor = float(value)
        else:
            raise ValueError(f"unknown search setting {key}")


def recall_at_k(ids: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Mean share of each query's true top-``k`` (``truth``'s first ``k`` columns) among its ``k`` hits."""
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ids, truth[:, :k])]))


def sweep_search_settings(index: FaissIndex, queries: np.ndarray, truth: np.ndarray, sweep: list[dict[str, Any]], *,
                          k: int = 10, latency_queries: int = 200, max_seconds: float = 600.0,
                          target_relative_ci: float = 0.03) -> list[dict[str, Any]]:
    """Recall@``k`` and batch-1 latency of every setting of ``sweep`` on ``index`` (on the threads FAISS has).

    Latency: at least ``latency_queries`` calls per setting (at most five times as many, ``max_seconds`` in
    all), over the first ``latency_queries`` queries. Returns one row per setting: ``setting`` (its label),
    ``recall@<k>``, ``p10_ms`` / ``p50_ms`` / ``p90_ms``, ``calls``, ``stable``, the self-check's
    ``self_check`` text and ``self_check_passed``, ``load_average_1min`` after the measurement and when it
    was ``measured``.
    """
    from care.bench.latency import COPY_SUFFIX, LatencySettings, measure_calls

    native = index.native
    recalls = {}
    for setting in sweep:
        apply_search_setting(native, setting)
        _, ids = native.search(queries, k)
        recalls[setting_label(setting)] = recall_at_k(ids, truth, k)

    def call(setting: dict[str, Any]):
        def run(i: int) -> None:
            apply_search_setting(native, setting)
            native.search(queries[i : i + 1], k)
        return run

    calls = {setting_label(s): call(s) for s in sweep}
    control = setting_label(sweep[0])
    calls[control + COPY_SUFFIX] = call(sweep[0])  # the same setting timed twice: the self-check
    settings = LatencySettings(warmup_calls=5, min_calls=latency_queries, max_calls=5 * latency_queries,
                               max_seconds=max_seconds, target_relative_ci=target_relative_ci)
    report = measure_calls(calls, min(latency_queries, len(queries)), settings=settings, control=control)
    rows = []
    for setting in sweep:
        label = setting_label(setting)
        m = report.models[label]
        rows.append({"setting": label, f"recall@{k}": round(recalls[label], 4),
                     "p10_ms": round(m.p10_ms, 3), "p50_ms": round(m.p50_ms, 3), "p90_ms": round(m.p90_ms, 3),
                     "calls": m.calls, "stable": m.stable, "self_check": report.self_check.describe(),
                     "self_check_passed": report.self_check.passed,
                     "load_average_1min": report.context["load_average_1min_after"],
                     "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        logger.info("%s: %s", label, rows[-1])
    return rows
