"""The measurements of ``care bench service-load``, all in one run:

1. **one client, interleaved** (:func:`one_client`) — per query, in a fresh random order: the bare loop (encode +
   search + lookup with the same engine in this process, :func:`bare_call`), a second copy of it (the self-check)
   and one ``POST /search`` to each variant's service (:class:`~care.bench.service_load.client.OneClient`), with the
   project's latency routine (:func:`care.bench.latency.measure_calls`). ``served_over_bare`` = a variant's HTTP
   p50 / the bare p50. Each answer's ``Server-Timing`` header gives the service's own view of its time:
   ``app_over_bare`` = its ``app`` p50 / the bare p50, what the service's code costs without the transport and
   without the time the service's process waits to be scheduled (on shared cores, the larger share).
2. **throughput** (:func:`load_level`) — ``clients`` connections for ``seconds`` per level and variant (the variants
   one after the other at each level): q/s, latency percentiles, statuses, the cores the service used.
3. **the bare loop's ceiling** (:func:`bare_ceiling`) — this process encoding + searching + looking up batches back
   to back, as fast as it can; its best q/s is the ceiling. ``throughput_of_ceiling`` = a variant's q/s at the most
   clients / the ceiling.
"""

from __future__ import annotations

import contextlib
import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from care.bench.service_load.client import OneClient, run_clients
from care.bench.service_load.config import ServiceLoadConfig
from care.errors import CareError

logger = logging.getLogger(__name__)

#: The bare loop's label in the interleaved timing, and its copy (the self-check).
BARE = "bare"
#: The ``Server-Timing`` metric of the service's whole time (its outermost layer to the answer's start).
APP = "app"
#: Untimed calls of each timed call before the interleaved timing.
WARMUP_CALLS = 20
#: Relative width of the medians' 95 % interval the interleaved timing aims at.
TARGET_RELATIVE_CI = 0.02


def search_bodies(queries: Sequence[str], k: int) -> list[bytes]:
    """The ``POST /search`` bodies of ``queries``."""
    return [orjson.dumps({"query": q, "k": k}) for q in queries]


def bare_call(engine: Any, queries: Sequence[str], k: int) -> Callable[[int], Any]:
    """``call(i)``: query ``i`` encoded, searched and looked up by ``engine`` in this process — what a request costs
    without HTTP (the same :class:`~care.serve.engine.SearchEngine` calls the service makes)."""

    def call(i: int) -> Any:
        (found,) = engine.search_vectors([queries[i]], [k], instruction=None)
        return engine.hits(found, k, None)

    return call


def _poster(client: OneClient, body: list[bytes], timings: list[str]) -> Callable[[int], None]:
    def call(i: int) -> None:
        status, answer, timing = client.post("/search", body[i])
        if status != 200:
            raise CareError(f"/search answered {status}: {answer[:300]!r}")
        timings.append(timing)

    return call


def server_timing_p50(headers: Sequence[str]) -> dict[str, float]:
    """p50 ms of each ``Server-Timing`` metric over a variant's answers (``app``: the service from its outermost
    layer to the answer's start; ``search``: the ``/search`` handler, encode + index + lookup included)."""
    from care.serve.metrics import parse_server_timing

    values: dict[str, list[float]] = {}
    for header in headers:
        for metric, ms in parse_server_timing([header]).items():
            values.setdefault(metric, []).append(ms)
    return {metric: round(statistics.median(ms), 4) for metric, ms in values.items()}


def one_client(engine: Any, urls: dict[str, str], queries: Sequence[str], config: ServiceLoadConfig) -> dict[str, Any]:
    """The interleaved one-client timing of the bare loop against each variant's service (module docstring)."""
    from care.bench.latency import COPY_SUFFIX, LatencySettings, measure_calls

    bodies = search_bodies(queries, config.k)
    clients = {name: OneClient(url) for name, url in urls.items()}
    timings: dict[str, list[str]] = {name: [] for name in urls}
    bare = bare_call(engine, queries, config.k)
    calls = {BARE: bare, BARE + COPY_SUFFIX: bare,
             **{name: _poster(client, bodies, timings[name]) for name, client in clients.items()}}
    settings = LatencySettings(warmup_calls=WARMUP_CALLS, min_calls=config.min_calls, max_calls=config.max_calls,
                               max_seconds=config.max_seconds, target_relative_ci=TARGET_RELATIVE_CI)
    try:
        report = measure_calls(calls, len(queries), settings=settings, control=BARE)
    finally:
        for client in clients.values():
            client.close()
    bare_ms = report.models[BARE].p50_ms
    variants = {}
    for name in urls:
        inside = server_timing_p50(timings[name][WARMUP_CALLS:])
        variants[name] = {"http_p50_ms": round(report.models[name].p50_ms, 4),
                          "http_p90_ms": round(report.models[name].p90_ms, 4),
                          "served_over_bare": round(report.models[name].p50_ms / bare_ms, 4),
                          "server_timing_p50_ms": inside,
                          "app_over_bare": round(inside[APP] / bare_ms, 4) if APP in inside else None}
    return {"bare_p50_ms": round(bare_ms, 4), "bare_p90_ms": round(report.models[BARE].p90_ms, 4),
            "variants": variants, "self_check": report.self_check.describe() if report.self_check else None,
            "trusted": report.trusted, "calls": report.models[BARE].calls, "context": report.context}


def load_level(service: Any, bodies: Sequence[bytes], clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` concurrent connections for ``seconds`` against ``service``: q/s, percentiles, statuses, and the
    cores the service (when spawned here) and this process used meanwhile."""
    cpu_before, own_before, started = service.cpu_seconds(), time.process_time(), time.perf_counter()
    result = run_clients(service.url, bodies, clients=clients, seconds=seconds)
    wall = time.perf_counter() - started
    cpu_after = service.cpu_seconds()
    row = {**result.to_dict(),
           "service_cores_busy": round((cpu_after - cpu_before) / wall, 2) if cpu_after is not None else None,
           "client_cores_busy": round((time.process_time() - own_before) / wall, 2),
           "load_average_1min": round(os.getloadavg()[0], 2)}
    logger.info("%s, %d clients: %.1f q/s, p50 %.3f ms, p99 %.3f ms, %s", service.variant, clients, row["qps"],
                row["p50_ms"], row["p99_ms"], row["status"])
    return row


def bare_ceiling(engine: Any, queries: Sequence[str], k: int, batches: Sequence[int], seconds: float) -> dict[str, Any]:
    """q/s of back-to-back encode + search + lookup in batches of each size in ``batches`` (no HTTP), and the best."""
    out: dict[str, Any] = {}
    for batch in batches:
        latencies, done, started = [], 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            texts = [queries[(done + j) % len(queries)] for j in range(batch)]
            t0 = time.perf_counter()
            for found in engine.search_vectors(texts, [k] * batch, instruction=None):
                engine.hits(found, k, None)
            latencies.append(time.perf_counter() - t0)
            done += batch
        elapsed = time.perf_counter() - started
        out[str(batch)] = {"qps": round(done / elapsed, 1),
                           "batch_p50_ms": round(float(np.percentile(np.asarray(latencies) * 1000, 50)), 3)}
        logger.info("bare loop, batches of %d: %s", batch, out[str(batch)])
    best = max(out, key=lambda b: out[b]["qps"])
    return {"batches": out, "ceiling_qps": out[best]["qps"], "best_batch": int(best)}


def run_measurement(engine: Any, services: dict[str, Any], queries: Sequence[str],
                    config: ServiceLoadConfig) -> dict[str, Any]:
    """Every measurement of the module docstring over running ``services`` (variant -> service); the ratios per
    variant in ``ratios``."""
    with contextlib.ExitStack() as stack:
        for service in services.values():
            stack.enter_context(service)
        one = one_client(engine, {name: s.url for name, s in services.items()}, queries, config)
        logger.info("one client: bare p50 %.3f ms; %s; %s", one["bare_p50_ms"],
                    {n: v["http_p50_ms"] for n, v in one["variants"].items()}, one["self_check"])
        bodies = search_bodies(queries, config.k)
        curves: dict[str, list[dict[str, Any]]] = {name: [] for name in services}
        for clients in config.clients:
            for name, service in services.items():
                curves[name].append(load_level(service, bodies, clients, config.seconds))
    ceiling = bare_ceiling(engine, queries, config.k, config.ceiling_batches, config.ceiling_seconds)
    ratios = {name: {"served_over_bare": one["variants"][name]["served_over_bare"],
                     "throughput_of_ceiling": round(curves[name][-1]["qps"] / ceiling["ceiling_qps"], 4)}
              for name in services}
    return {"one_client": one, "curves": curves, "ceiling": ceiling, "ratios": ratios}
