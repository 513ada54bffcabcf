"""The search service under load, side by side with the bare encode + search loop (issue 18, item 3).

Setup (cached under ``runs/service_load/``):

* **query encoder** — multilingual-e5-small cut to 6 of its 12 layers (every other one: the e5
  student's shape, ``care model prune --keep strided``), exported with the project's ONNX export in
  int8 (``care export-onnx``). The student's *trained* weights are not at hand in this run; its
  latency does not depend on them (same graph, same shapes).
* **index** — 100,000 documents: the first 100k vectors of ``benchmarks/search_1m.py``'s 384-d set
  (7,244 real e5 passage vectors of the dev corpus, the rest clustered synthetic), in a FAISS index of
  the type ``--index-type`` (default HNSW, ``benchmarks/results/search_1m``'s recommendation at this
  size), with a document store (real answers; synthetic rows get a placeholder text).

Measured, in one run:

1. **overhead at one client** — per query, in random order: the bare loop (``engine.search_vectors`` +
   ``engine.hits`` in this process, no HTTP) and one HTTP ``POST /search`` to each setting's ``care serve``
   (separate processes with the same encoder, index and threads, all up at once so the settings are
   compared side by side); the project's latency routine, with a self-check of two copies of the bare
   loop. Service overhead = HTTP p50 / bare p50 - 1. Beside them, in the same interleaving: a no-op app
   (the transport floor) and the thinnest HTTP service around the same engine (``http_floor_app.thin_app``),
   so the overhead splits into what any HTTP service in its own process costs here (thin / bare) and what
   ``care serve``'s own code adds (HTTP / thin); each answer's ``Server-Timing`` header gives the service's
   own view of its time.
2. **throughput curve** — 1, 8, 32 and 64 concurrent clients for ``--seconds`` each (at each level the
   settings one after the other): q/s, p50, p90, p99, errors, and the CPU the service process used
   (cores busy); beside it the bare loop's ceiling:
   one process encoding + searching batches of 1, 8 and 32 queries back to back.
3. for each micro-batcher setting in ``--settings`` (max batch size, max wait, encoder threads, and the
   inline limit: ``b32w0t1i0`` never runs a request on the event loop, ``b32w0t1`` uses the default).

Writes ``benchmarks/results/service_load/<name>.json`` (``care.bench.record``) and ``.md``.

Usage::

    nice -n 10 python -m benchmarks.search_1m --dim 384 --step data   # the vectors
    nice -n 10 python -m benchmarks.service_load                      # the dev set's texts: $CARE_DEV_SET
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import contextlib
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, ROOT, RUNS, dev_set

logger = logging.getLogger("service_load")

EXPERIMENT = "service_load"
N_DOCS = 100_000
TOP_K = 10
CLIENTS = (1, 8, 32, 64)
#: Batch sizes of the bare loop's throughput ceiling.
BARE_BATCHES = (1, 8, 32)
#: Targets of issue 18.
OVERHEAD_TARGET = 0.10
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


def parse_setting(text: str) -> dict[str, Any]:
    """``"b32w0t1"`` -> max_batch_size 32, max_wait_ms 0, encoder threads 1, and the service's defaults for
    the inline limit and the /search hot path; ``i0`` after it also sets ``inline_max_items`` 0 (always through
    the batcher's thread), ``f0`` ``fast_search`` false (/search through FastAPI's route), e.g. ``b32w0t1f0``."""
    import re

    from care.serve.config import ServeConfig

    match = re.fullmatch(r"b(\d+)w([\d.]+)t(\d+)(?:i(\d+))?(?:f([01]))?", text)
    if not match:
        raise SystemExit(f"--settings: {text!r} is not like b32w0t1, b32w0t1i0 or b32w0t1f0 (max batch, max wait ms, "
                         "threads, inline max items, /search hot path on or off)")
    defaults = ServeConfig()
    inline = int(match[4]) if match[4] is not None else defaults.inline_max_items
    fast = bool(int(match[5])) if match[5] is not None else defaults.fast_search
    return {"max_batch_size": int(match[1]), "max_wait_ms": float(match[2]), "threads": int(match[3]),
            "inline_max_items": inline, "fast_search": fast}


def query_encoder(work: Path) -> Path:
    """e5 cut to 6 strided layers, exported to ONNX (fp32 + int8) once."""
    from care.encoders.onnx import INT8_FILE
    from care.models.onnx_export import export_query_encoder

    out = work / "e5-L6-strided-onnx"
    if not (out / INT8_FILE).is_file():
        from benchmarks.bench_datasets import e5_cut

        base = e5_cut(6, "strided")
        export_query_encoder(f"{base}?pooling=mean&query_prefix=query%3A%20&instructions=false", out, quantize=True)
    return out


def index_folder(work: Path, index_type: str, options: dict[str, Any]) -> Path:
    """A servable index folder over the first N_DOCS vectors of search_1m's 384-d set."""
    from care.data.io import iter_jsonl
    from care.encoders.fingerprint import file_sha256
    from care.index.config import IndexConfig
    from care.index.docstore import build_docstore
    from care.index.faiss_index import build_index
    from care.index.manifest import DOCSTORE_FILE, INDEX_DIR, IndexManifest

    config = IndexConfig.from_dict({"type": index_type, **options})
    folder = work / f"index-{index_type}-{N_DOCS}"
    if (folder / "manifest.json").is_file():
        return folder
    vectors_path = RUNS / "search_1m" / "d384" / "vectors.npy"
    if not vectors_path.is_file():
        raise SystemExit(f"{vectors_path} is missing: run 'python -m benchmarks.search_1m --dim 384 --step data' first")
    toyhom = dev_set()
    vectors = np.load(vectors_path, mmap_mode="r")[:N_DOCS]
    real = [obj for _, obj in iter_jsonl(toyhom / "corpus.jsonl")]
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    index = build_index(config, vectors.shape[1])
    for start in range(0, N_DOCS, 20_000):
        index.add(np.ascontiguousarray(vectors[start : start + 20_000]))
    index.save(folder / INDEX_DIR)
    build_s = time.perf_counter() - started

    def rows():
        for i in range(N_DOCS):
            yield i + 1, (real[i] if i < len(real) else {"id": f"synthetic-{i}", "text": f"synthetic document {i}"})

    build_docstore(folder / DOCSTORE_FILE, rows(), source="search_1m d384 (first 100k rows)")
    corpus = toyhom / "corpus.jsonl"
    IndexManifest(model="e5", model_identity="e5", encoder_fingerprint="search_1m-d384", corpus=str(corpus),
                  corpus_sha256=file_sha256(corpus), instruction=None, dim=int(vectors.shape[1]), n_docs=N_DOCS,
                  backend="faiss", index={"type": "faiss", **config.to_dict()}).save(folder)
    (folder / "build_seconds.json").write_text(json.dumps({"index_build_s": round(build_s, 1)}), encoding="utf-8")
    return folder


def load_queries() -> list[str]:
    from care.data.retrieval import load_queries as load

    return list(load(dev_set() / "test_queries.jsonl").values())[:N_QUERIES]


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


def run_settings(settings: dict[str, dict[str, Any]], index: Path, onnx: Path, queries: list[str], seconds: float,
                 work: Path) -> dict[str, dict[str, Any]]:
    """Every setting's service at once for the interleaved one-client comparison, then each one's load curve
    alone (an idle service costs nothing); the bare loop's ceiling last. Cached per run of settings."""
    from care.data.io import atomic_write
    from care.serve.engine import load_engine

    threads = {s["threads"] for s in settings.values()}
    if len(threads) > 1:
        raise SystemExit("--settings: the one-client comparison interleaves every setting against one bare loop; "
                         "give settings with one thread count (run the script once per thread count)")
    cached = work / f"result-{index.name}-{'+'.join(settings)}-{int(seconds)}s.json"
    if cached.is_file():
        return json.loads(cached.read_text(encoding="utf-8"))
    engine_threads = threads.pop()
    engine = load_engine(index, onnx_dir=onnx, int8=True, onnx_threads=engine_threads)
    with contextlib.ExitStack() as stack:
        services = {name: stack.enter_context(Service(index, onnx, setting, work)) for name, setting in settings.items()}
        floor_body = search_answer(engine, queries[0])
        floor = stack.enter_context(floor_service(work, floor_body))
        thin = stack.enter_context(thin_service(work, index, onnx, engine_threads))
        overheads = overhead_at_one_client(engine, {name: svc.url for name, svc in services.items()}, floor.url, thin.url,
                                           queries, len(floor_body))
        for name, o in overheads.items():
            logger.info("%s: bare p50 %.3f ms, http p50 %.3f ms, transport floor %.3f ms (%s)", name, o["bare_p50_ms"],
                        o["http_p50_ms"], o["floor_p50_ms"], o["self_check"])
        curves: dict[str, list[dict[str, Any]]] = {name: [] for name in services}
        for clients in CLIENTS:  # level by level, the settings one after the other at each level
            for name, svc in services.items():
                curves[name].append(load_level(svc, queries, seconds, clients))
    ceiling = bare_ceiling(engine, queries, min(seconds, 20.0))
    results = {name: {"setting": setting, "overhead": overheads[name], "curve": curves[name], "bare_ceiling": ceiling}
               for name, setting in settings.items()}
    with atomic_write(cached) as fh:
        json.dump(results, fh, indent=2)
    return results


def _split_lines(overhead: dict[str, Any]) -> list[str]:
    """Where the one-client overhead goes (records before the floor was measured have no split)."""
    if overhead.get("floor_p50_ms") is None:
        return []
    return [f"Split: transport floor (a no-op ASGI app under the same uvicorn, same client) p50 "
            f"{overhead['floor_p50_ms']:.3f} ms{_floor_body(overhead)}; the rest {overhead['service_code_p50_ms']:.3f} ms "
            f"(http − bare − floor: the service's own code, plus what waiting for a model call adds to the transport, "
            f"which the no-op floor does not show — the thin service separates them).", *_warm_lines(overhead),
            *_server_timing_lines(overhead)]


def _thin_lines(overhead: dict[str, Any]) -> list[str]:
    """``care serve`` against the thinnest HTTP service around the same engine (records before it have none)."""
    if overhead.get("over_thin_p50") is None:
        return []
    warm = overhead.get("warm_blocks_p50_ms") or {}
    return [f"Against the thinnest HTTP service around the same engine (`http_floor_app.thin_app`: orjson body, "
            f"encode + search + lookup on the event loop, no checks, batcher, middleware or FastAPI; same uvicorn): "
            f"thin p50 {overhead['thin_p50_ms']:.3f} ms interleaved ({overhead['thin_overhead_p50'] * 100:+.1f} % over the bare "
            f"loop: what any HTTP service in its own process costs here), `care serve` "
            f"{overhead['over_thin_p50'] * 100:+.1f} % over thin; warm: thin {warm['thin']:.3f} ms "
            f"({warm['thin'] / warm['bare'] * 100 - 100:+.1f} % over bare), `care serve` "
            f"{overhead['warm_blocks_over_thin_p50'] * 100:+.1f} % over thin — the share the service's own code costs.", ""]


def _server_timing_lines(overhead: dict[str, Any]) -> list[str]:
    """The service's own view (its ``Server-Timing`` header) beside the client's, per phase (p50s subtracted)."""
    timings = overhead.get("server_timing_p50_ms") or {}  # records before the header have none
    bare = {"interleaved": overhead["bare_p50_ms"], "warm": (overhead.get("warm_blocks_p50_ms") or {}).get("bare")}
    http = {"interleaved": overhead["http_p50_ms"], "warm": (overhead.get("warm_blocks_p50_ms") or {}).get("http")}
    lines = []
    for phase, t in timings.items():
        if "app" not in t or "search" not in t or bare.get(phase) is None:
            continue
        lines += ["", f"Inside the service ({phase}, its `Server-Timing` header): the /search handler (checks, encode, "
                  f"index, lookup) p50 {t['search']:.3f} ms against the bare loop's {bare[phase]:.3f} ms in the "
                  f"benchmark's process ({t['search'] - bare[phase]:+.3f} ms); the layers around it (guard, metrics, body "
                  f"parsing, answer) {t['app'] - t['search']:.3f} ms (app {t['app']:.3f} ms); outside the service's "
                  f"code (loopback TCP, uvicorn's HTTP parsing and writing, the client) {http[phase] - t['app']:.3f} ms "
                  f"(HTTP {http[phase]:.3f} ms − app)."]
    return lines


def _warm_lines(overhead: dict[str, Any]) -> list[str]:
    warm = overhead.get("warm_blocks_p50_ms")  # records before the warm blocks have none
    if not warm:
        return []
    return ["", f"Warm (each in blocks of {N_QUERIES} queries in a row, blocks alternating, {WARM_ROUNDS} rounds; as under "
            f"steady traffic): bare p50 {warm['bare']:.3f} ms, HTTP {warm['http']:.3f} ms, floor {warm['floor']:.3f} ms → "
            f"service overhead {overhead['warm_blocks_overhead_p50'] * 100:.1f} %, the rest (http − bare − floor) "
            f"{warm['http'] - warm['bare'] - warm['floor']:.3f} ms."]


def _floor_body(overhead: dict[str, Any]) -> str:
    size = overhead.get("floor_body_bytes")  # records before the floor answered a real hit list have none
    return f" (answering the {size:,} bytes of a real /search answer)" if size else ""


def _with_others(overhead: dict[str, Any], name: str) -> str:
    others = [n for n in overhead.get("interleaved_with", []) if n != name]
    return f" (with {', '.join(others)})" if others else ""


def _p99_cliff(curve: list[dict[str, Any]]) -> bool:
    """A cliff: p99 grows faster than the queue can explain (more than 3x p50 at any load level)."""
    return any(row["p99_ms"] > 3 * row["p50_ms"] for row in curve)


def write_report(results: dict[str, Any], args: argparse.Namespace, index: Path, onnx: Path) -> None:
    from care.bench.record import BenchmarkRecord, write_record
    from care.data.io import atomic_write

    build = json.loads((index / "build_seconds.json").read_text(encoding="utf-8"))
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=args.name,
        config={"query_encoder": "multilingual-e5-small, 6 strided layers (the e5 student's shape; untrained weights), "
                                 "ONNX int8 (care export-onnx)", "onnx": str(onnx.relative_to(ROOT)),
                "documents": N_DOCS, "index": args.index_type, "index_options": json.loads(args.index_options),
                "index_build_s": build["index_build_s"], "clients": list(CLIENTS), "seconds_per_level": args.seconds,
                "settings": {name: r["setting"] for name, r in results.items()}, "queries": N_QUERIES},
        scores={name: {"overhead_p50": r["overhead"]["overhead_p50"], "p99_cliff": _p99_cliff(r["curve"]),
                       "warm_blocks_overhead_p50": r["overhead"].get("warm_blocks_overhead_p50"),
                       **{key: r["overhead"].get(key) for key in ("thin_overhead_p50", "over_thin_p50",
                                                                  "warm_blocks_over_thin_p50")}}
                for name, r in results.items()},
        latencies={name: {"one_client": {k: r["overhead"].get(k) for k in ("bare_p50_ms", "http_p50_ms", "floor_p50_ms",
                                                                           "service_code_p50_ms",
                                                                           "warm_blocks_p50_ms", "thin_p50_ms",
                                                                           "server_timing_p50_ms",
                                                                           "thin_server_timing_p50_ms")},
                          "curve": r["curve"], "bare_ceiling": r["bare_ceiling"]} for name, r in results.items()},
        extra={"self_checks": {name: r["overhead"]["self_check"] for name, r in results.items()}})
    path = write_record(record, RESULTS)
    lines = [f"# The search service under load — {N_DOCS:,} documents, {args.index_type}, e5 6-layer int8 query encoder", "",
             "Query encoder: multilingual-e5-small cut to 6 strided layers (the e5 student's shape; its trained weights "
             "were not at hand, the latency does not depend on them), ONNX int8. Index: the first 100k vectors of "
             "`search_1m`'s 384-d set (7,244 real e5 passages + clustered synthetic). `care serve` runs in its own "
             "process on the same 2 shared cores as the load generator (its CPU use is listed).", ""]
    for name, r in results.items():
        s, o = r["setting"], r["overhead"]
        overhead = f"{o['overhead_p50'] * 100:.1f} %" if o["overhead_p50"] is not None else "not given (self-check failed)"
        later = "".join(f", {key}={s[key]}" for key in ("inline_max_items", "fast_search") if key in s)  # older records lack them
        lines += [f"## max_batch_size={s['max_batch_size']}, max_wait_ms={s['max_wait_ms']}, encoder threads={s['threads']}"
                  + later, "",
                  f"One client, interleaved per query{_with_others(o, name)}: bare encode + search + lookup p50 {o['bare_p50_ms']:.3f} ms, "
                  f"HTTP p50 {o['http_p50_ms']:.3f} ms → service overhead {overhead} (target ≤ {OVERHEAD_TARGET * 100:.0f} %). "
                  f"{o['self_check']}.", "", *_thin_lines(o), *_split_lines(o), "",
                  "| clients | q/s | p50 ms | p90 ms | p99 ms | non-200 | dropped | service cores busy | load generator cores |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in r["curve"]:
            bad = sum(n for code, n in row["status"].items() if code != "200")
            lines.append(f"| {row['clients']} | {row['qps']} | {row['p50_ms']} | {row['p90_ms']} | {row['p99_ms']} | {bad} | "
                         f"{row['dropped']} | {row['service_cores_busy']} | {row['load_generator_cores_busy']} |")
        ceiling = ", ".join(f"batches of {b}: {v['qps']} q/s" for b, v in r["bare_ceiling"].items())
        lines += ["", f"Bare loop ceiling (one process, no HTTP): {ceiling}. p99 cliff (p99 > 3× p50 at some level): "
                  f"{'yes' if _p99_cliff(r['curve']) else 'no'}.", ""]
    lines += [f"Command: `{record.command}` (commit {record.commit}); record `{path.relative_to(ROOT)}`."]
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default="b32w0t1", help="comma-separated micro-batcher settings like b32w0t1")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds per concurrency level")
    parser.add_argument("--index-type", default="hnsw")
    parser.add_argument("--index-options", default='{"hnsw_m": 32, "ef_construction": 80, "ef_search": 64}')
    parser.add_argument("--name", default="e5_L6_int8_100k")
    parser.add_argument("--work", type=Path, default=RUNS / "service_load")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args.work.mkdir(parents=True, exist_ok=True)
    onnx = query_encoder(args.work)
    index = index_folder(args.work, args.index_type, json.loads(args.index_options))
    queries = load_queries()
    settings = {text: parse_setting(text) for text in args.settings.split(",")}
    results = run_settings(settings, index, onnx, queries, args.seconds, args.work)
    write_report(results, args, index, onnx)


if __name__ == "__main__":
    main()
