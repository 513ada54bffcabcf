"""``benchmarks/service_load.py``'s services and clients: ``care serve`` and the reference apps in child processes,
the interleaved one-client comparison against the bare loop, warm blocks, the bare loop's ceiling and one load
level (the load itself is :func:`care.serve.loadgen.run_load`, the latency routine :mod:`care.bench.latency`)."""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ROOT

logger = logging.getLogger("service_load")

TOP_K = 10
CLIENTS = (1, 8, 32, 64)
#: Batch sizes of the bare loop's throughput ceiling.
BARE_BATCHES = (1, 8, 32)
#: Seconds to wait for ``care serve`` to answer /health.
STARTUP_TIMEOUT_S = 120.0
#: Rounds of alternating warm blocks (:func:`in_blocks`).
WARM_ROUNDS = 3
#: The setting's keys that go to ``care serve --config`` (``threads`` is a command-line option).
SERVE_KEYS = ("max_batch_size", "max_wait_ms", "inline_max_items", "fast_search")
#: The thinnest HTTP service around the same engine (``http_floor_app.thin_app``), timed beside ``care serve``.
THIN = "thin"
#: Queries used (dev test questions).
N_QUERIES = 400


class Service:
    """``care serve`` in a child process (bounded: stopped on exit)."""

    def __init__(self, index: Path, onnx: Path, setting: dict[str, Any], work: Path) -> None:
        from care.serve.server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = work / f"serve-{self.port}.json"
        config.write_text(json.dumps({k: setting[k] for k in SERVE_KEYS if k in setting}),
                          encoding="utf-8")
        command = [str(Path(sys.executable).parent / "care"), "serve", "--index", str(index), "--onnx", str(onnx), "--int8",
                   "--threads", str(setting["threads"]), "--port", str(self.port), "--config", str(config)]
        self.log = open(work / f"serve-{self.port}.log", "w", encoding="utf-8")  # noqa: SIM115 — closed in __exit__
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ})

    def __enter__(self) -> Service:
        import httpx

        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"care serve exited with {self.process.returncode}; see {self.log.name}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise SystemExit(f"care serve did not answer within {STARTUP_TIMEOUT_S:.0f} s; see {self.log.name}")

    def cpu_seconds(self) -> float:
        import psutil

        times = psutil.Process(self.process.pid).cpu_times()
        return times.user + times.system

    def __exit__(self, *_: Any) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class ReferenceService(Service):
    """One of ``benchmarks/http_floor_app.py``'s reference apps under uvicorn in a child process, with the
    event loop and HTTP parser ``care serve`` uses (uvloop, httptools, no access log); ``env`` configures
    it. Started, waited for and stopped like :class:`Service` (any path answers 200, /health included)."""

    def __init__(self, work: Path, app: str, env: dict[str, str]) -> None:
        from care.serve.server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "uvicorn", f"benchmarks.http_floor_app:{app}", "--app-dir", str(ROOT),
                   "--port", str(self.port), "--loop", "uvloop", "--http", "httptools", "--no-access-log",
                   "--log-level", "warning"]
        self.log = open(work / f"{app}-{self.port}.log", "w", encoding="utf-8")  # noqa: SIM115 — closed in __exit__
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **env})


def floor_service(work: Path, body: bytes) -> ReferenceService:
    """The no-op app answering every request with the bytes of ``body`` (a real ``/search`` answer)."""
    body_file = work / "floor-body.json"
    body_file.write_bytes(body)
    return ReferenceService(work, "app", {"CARE_FLOOR_BODY": str(body_file)})


def thin_service(work: Path, index: Path, onnx: Path, threads: int) -> ReferenceService:
    """The thinnest HTTP service around the same engine (``http_floor_app.thin_app``)."""
    return ReferenceService(work, "thin_app", {"CARE_THIN_INDEX": str(index), "CARE_THIN_ONNX": str(onnx),
                                               "CARE_THIN_THREADS": str(threads)})


def search_answer(engine: Any, query: str) -> bytes:
    """The bytes ``/search`` answers for ``query`` (k = TOP_K), built as the service builds them."""
    from care.serve.search_path import search_body

    (found,) = engine.search_vectors([query], [TOP_K], instruction=None)
    return search_body(engine.hits(found, TOP_K, None), TOP_K, took_ms=1.0)


def overhead_at_one_client(engine: Any, urls: dict[str, str], floor_url: str, thin_url: str, queries: list[str],
                           floor_body_bytes: int) -> dict[str, dict[str, Any]]:
    """Bare loop vs one HTTP client of each service vs the transport floor, interleaved per query in random
    order (self-checked), so the settings' overheads are measured side by side.

    The client is the standard library's ``http.client`` on one kept-alive connection per server: the
    lightest client there is. ``floor`` is the same request to a no-op app under the same uvicorn
    settings that answers with the bytes of a real ``/search`` answer, so ``http - bare`` (the overhead)
    splits into ``floor`` (loopback TCP, HTTP parsing, the client, the answer's bytes) and ``http - bare - floor``
    (the rest: the service's own code — validation, the batcher's hand-off, JSON of the hits, middleware — plus
    what waiting for a model call adds to the transport; the thin service's row separates the two).
    Returns one entry per setting name of ``urls``."""
    import http.client
    from urllib.parse import urlsplit

    from care.bench.latency import COPY_SUFFIX, LatencySettings, measure_calls

    def connect(address: str) -> http.client.HTTPConnection:
        where = urlsplit(address)
        return http.client.HTTPConnection(where.hostname, where.port, timeout=30.0)

    clients = {name: connect(url) for name, url in urls.items()}
    floor_client, thin_client = connect(floor_url), connect(thin_url)
    bodies = [json.dumps({"query": q, "k": TOP_K}).encode("utf-8") for q in queries]

    def bare(i: int) -> None:
        (found,) = engine.search_vectors([queries[i]], [TOP_K], instruction=None)
        engine.hits(found, TOP_K, None)

    timing_headers: dict[str, dict[str, list[str]]] = {"interleaved": {}, "warm": {}}
    phase = ["warm"]

    def post(connection: http.client.HTTPConnection, i: int, name: str | None = None) -> None:
        for attempt in (1, 2):
            try:
                connection.request("POST", "/search", body=bodies[i], headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                # uvicorn closes a connection idle for 5 s (its keep-alive timeout), which a warm block of the
                # other calls can outlast: reconnect once (one call of the block, not its median, pays for it)
                connection.close()
                if attempt == 2:
                    raise
        response.read()
        if response.status != 200:
            raise SystemExit(f"/search answered {response.status}")
        if name is not None:  # kept raw (parsed after the timing); the floor app sends none
            timing_headers[phase[0]].setdefault(name, []).append(response.getheader("server-timing") or "")

    def poster(connection: http.client.HTTPConnection, name: str | None = None):
        return lambda i: post(connection, i, name)

    calls = {"bare": bare, "bare" + COPY_SUFFIX: bare, "floor": poster(floor_client), "thin": poster(thin_client, THIN),
             **{f"http {name}": poster(client, name) for name, client in clients.items()}}
    warm = in_blocks({k: v for k, v in calls.items() if k != "bare" + COPY_SUFFIX}, len(queries))
    phase[0] = "interleaved"
    settings = LatencySettings(warmup_calls=5, min_calls=300, max_calls=2000, max_seconds=240.0 * len(urls),
                               target_relative_ci=0.02)
    report = measure_calls(calls, len(queries), settings=settings, control="bare")
    for client in (*clients.values(), floor_client, thin_client):
        client.close()
    m = report.models
    bare_ms, floor_ms, thin_ms = m["bare"].p50_ms, m["floor"].p50_ms, m["thin"].p50_ms
    out = {}
    for name in urls:
        http_ms = m[f"http {name}"].p50_ms
        out[name] = {"report": report.to_dict(), "self_check": report.self_check.describe(), "trusted": report.trusted,
                     "bare_p50_ms": bare_ms, "http_p50_ms": http_ms, "floor_p50_ms": floor_ms,
                     "service_code_p50_ms": http_ms - bare_ms - floor_ms, "interleaved_with": sorted(urls),
                     "floor_body_bytes": floor_body_bytes, "thin_p50_ms": thin_ms,
                     "thin_overhead_p50": thin_ms / bare_ms - 1.0 if report.trusted else None,
                     "over_thin_p50": http_ms / thin_ms - 1.0 if report.trusted else None,
                     "warm_blocks_p50_ms": {"bare": warm["bare"], "http": warm[f"http {name}"], "floor": warm["floor"],
                                            "thin": warm["thin"]},
                     "warm_blocks_overhead_p50": warm[f"http {name}"] / warm["bare"] - 1.0,
                     "warm_blocks_over_thin_p50": warm[f"http {name}"] / warm["thin"] - 1.0,
                     "overhead_p50": http_ms / bare_ms - 1.0 if report.trusted else None,
                     "server_timing_p50_ms": {phase_name: server_timing_p50(headers.get(name, []))
                                              for phase_name, headers in timing_headers.items()},
                     "thin_server_timing_p50_ms": {phase_name: server_timing_p50(headers.get(THIN, []))
                                                   for phase_name, headers in timing_headers.items()}}
    return out


def server_timing_p50(headers: list[str]) -> dict[str, float]:
    """p50 ms of each ``Server-Timing`` metric over one call's answers (``app``: the service from its outermost
    layer to the answer's start; ``search``: the /search handler, encode + index + lookup included)."""
    from care.serve.metrics import parse_server_timing

    values: dict[str, list[float]] = {}
    for header in headers:
        for metric, ms in parse_server_timing([header]).items():
            values.setdefault(metric, []).append(ms)
    return {metric: round(statistics.median(ms), 4) for metric, ms in values.items()}


def in_blocks(calls: dict[str, Any], n_queries: int) -> dict[str, float]:
    """p50 ms of each call when it runs ``n_queries`` times in a row (warm: its own code and data stay in
    the caches, as under steady traffic), the calls' blocks alternating for :data:`WARM_ROUNDS` rounds
    after one warm-up round. The interleaved routine instead runs a different call before every
    call, so each starts with caches the others used: fair against drift, pessimistic for all."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(WARM_ROUNDS + 1):
        for name, call in calls.items():
            for i in range(n_queries):
                started = time.perf_counter()
                call(i)
                if round_:
                    times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def bare_ceiling(engine: Any, queries: list[str], seconds: float) -> dict[str, Any]:
    """q/s of back-to-back encode + search + lookup in batches (no HTTP): what one process can do."""
    out = {}
    for batch in BARE_BATCHES:
        latencies, done, started = [], 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            texts = [queries[(done + j) % len(queries)] for j in range(batch)]
            t0 = time.perf_counter()
            found = engine.search_vectors(texts, [TOP_K] * batch, instruction=None)
            for hits in found:
                engine.hits(hits, TOP_K, None)
            latencies.append(time.perf_counter() - t0)
            done += batch
        elapsed = time.perf_counter() - started
        lat = np.asarray(latencies) * 1000
        out[str(batch)] = {"qps": round(done / elapsed, 1), "batch_p50_ms": round(float(np.percentile(lat, 50)), 3),
                           "batch_p99_ms": round(float(np.percentile(lat, 99)), 3)}
        logger.info("bare loop, batches of %d: %s", batch, out[str(batch)])
    return out


def load_level(service: Service, queries: list[str], seconds: float, clients: int) -> dict[str, Any]:
    """``clients`` concurrent clients for ``seconds`` against ``service``: q/s, latency percentiles, errors, CPU."""
    from care.serve.loadgen import run_load

    cpu_before, own_before, started = service.cpu_seconds(), time.process_time(), time.perf_counter()
    report = run_load(service.url, queries, clients=clients, duration_s=seconds, k=TOP_K)
    wall = time.perf_counter() - started
    row = {**report.to_dict(), "service_cores_busy": round((service.cpu_seconds() - cpu_before) / wall, 2),
           "load_generator_cores_busy": round((time.process_time() - own_before) / wall, 2),
           "load_average_1min": os.getloadavg()[0]}
    row.pop("errors", None)
    logger.info("%s, %d clients: %s", service.url, clients, row)
    return row
