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
   ``engine.hits`` in this process, no HTTP) and one HTTP ``POST /search`` to ``care serve`` (a separate
   process with the same encoder, index and threads); the project's latency routine, with a
   self-check of two copies of the bare loop. Service overhead = HTTP p50 / bare p50 - 1.
2. **throughput curve** — 1, 8, 32 and 64 concurrent clients for ``--seconds`` each: q/s, p50, p90,
   p99, errors, and the CPU the service process used (cores busy); beside it the bare loop's ceiling:
   one process encoding + searching batches of 1, 8 and 32 queries back to back.
3. for each micro-batcher setting in ``--settings`` (max batch size, max wait, encoder threads).

Writes ``benchmarks/results/service_load/<name>.json`` (``care.bench.record``) and ``.md``.

Usage::

    nice -n 10 python benchmarks/search_1m.py --dim 384 --step data   # the vectors
    nice -n 10 python benchmarks/service_load.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("service_load")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
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
#: Queries used (dev test questions).
N_QUERIES = 400


def parse_setting(text: str) -> dict[str, Any]:
    """``"b32w0t1"`` -> max_batch_size 32, max_wait_ms 0, encoder threads 1."""
    import re

    match = re.fullmatch(r"b(\d+)w([\d.]+)t(\d+)", text)
    if not match:
        raise SystemExit(f"--settings: {text!r} is not like b32w0t1 (max batch, max wait ms, threads)")
    return {"max_batch_size": int(match[1]), "max_wait_ms": float(match[2]), "threads": int(match[3])}


def query_encoder(work: Path) -> Path:
    """e5 cut to 6 strided layers, exported to ONNX (fp32 + int8) once."""
    from care.encoders.onnx import INT8_FILE
    from care.models.onnx_export import export_query_encoder

    out = work / "e5-L6-strided-onnx"
    if not (out / INT8_FILE).is_file():
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_datasets import e5_cut

        base = e5_cut(6, "strided")
        export_query_encoder(f"{base}?pooling=mean&query_prefix=query%3A%20&instructions=false", out, quantize=True)
    return out


def index_folder(work: Path, index_type: str, options: dict[str, Any]) -> Path:
    """A servable index folder over the first N_DOCS vectors of search_1m's 384-d set."""
    from care.data.io import iter_jsonl
    from care.index.build import file_sha256
    from care.index.config import IndexConfig
    from care.index.docstore import build_docstore
    from care.index.faiss_index import build_index
    from care.index.manifest import DOCSTORE_FILE, INDEX_DIR, IndexManifest

    config = IndexConfig.from_dict({"type": index_type, **options})
    folder = work / f"index-{index_type}-{N_DOCS}"
    if (folder / "manifest.json").is_file():
        return folder
    vectors_path = ROOT / "runs" / "search_1m" / "d384" / "vectors.npy"
    if not vectors_path.is_file():
        raise SystemExit(f"{vectors_path} is missing: run 'python benchmarks/search_1m.py --dim 384 --step data' first")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_datasets import TOYHOM

    vectors = np.load(vectors_path, mmap_mode="r")[:N_DOCS]
    real = [obj for _, obj in iter_jsonl(TOYHOM / "corpus.jsonl")]
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
    corpus = TOYHOM / "corpus.jsonl"
    IndexManifest(model="e5", model_identity="e5", encoder_fingerprint="search_1m-d384", corpus=str(corpus),
                  corpus_sha256=file_sha256(corpus), instruction=None, dim=int(vectors.shape[1]), n_docs=N_DOCS,
                  backend="faiss", index={"type": "faiss", **config.to_dict()}).save(folder)
    (folder / "build_seconds.json").write_text(json.dumps({"index_build_s": round(build_s, 1)}), encoding="utf-8")
    return folder


def load_queries() -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_datasets import TOYHOM

    from care.data.retrieval import load_queries as load

    return list(load(TOYHOM / "test_queries.jsonl").values())[:N_QUERIES]


class Service:
    """``care serve`` in a child process (bounded: stopped on exit)."""

    def __init__(self, index: Path, onnx: Path, setting: dict[str, Any], work: Path) -> None:
        from care.serve.server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = work / f"serve-{self.port}.json"
        config.write_text(json.dumps({"max_batch_size": setting["max_batch_size"], "max_wait_ms": setting["max_wait_ms"]}),
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


class FloorService(Service):
    """``benchmarks/http_floor_app.py`` (a no-op ASGI app) under uvicorn in a child process, with the
    event loop and HTTP parser ``care serve`` uses (uvloop, httptools, no access log). Started, waited
    for and stopped like :class:`Service` (any path answers 200, /health included)."""

    def __init__(self, work: Path) -> None:
        from care.serve.server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "uvicorn", "http_floor_app:app", "--app-dir", str(Path(__file__).parent),
                   "--port", str(self.port), "--loop", "uvloop", "--http", "httptools", "--no-access-log",
                   "--log-level", "warning"]
        self.log = open(work / f"floor-{self.port}.log", "w", encoding="utf-8")  # noqa: SIM115 — closed in __exit__
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)


def overhead_at_one_client(engine: Any, url: str, floor_url: str, queries: list[str]) -> dict[str, Any]:
    """Bare loop vs one HTTP client vs the transport floor, interleaved per query in random order (self-checked).

    The client is the standard library's ``http.client`` on one kept-alive connection per server: the
    lightest client there is. ``floor`` is the same request to a no-op app under the same uvicorn
    settings, so ``http - bare`` (the overhead) splits into ``floor`` (loopback TCP, HTTP parsing, the
    client) and ``http - bare - floor`` (the service's own code: validation, the batcher's hand-off,
    JSON of the hits, middleware)."""
    import http.client
    from urllib.parse import urlsplit

    from care.bench.latency import COPY_SUFFIX, LatencySettings, measure_calls

    def connect(address: str) -> http.client.HTTPConnection:
        where = urlsplit(address)
        return http.client.HTTPConnection(where.hostname, where.port, timeout=30.0)

    client, floor_client = connect(url), connect(floor_url)
    bodies = [json.dumps({"query": q, "k": TOP_K}).encode("utf-8") for q in queries]

    def bare(i: int) -> None:
        (found,) = engine.search_vectors([queries[i]], [TOP_K], instruction=None)
        engine.hits(found, TOP_K, None)

    def post(connection: http.client.HTTPConnection, i: int) -> None:
        connection.request("POST", "/search", body=bodies[i], headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"/search answered {response.status}")

    settings = LatencySettings(warmup_calls=5, min_calls=300, max_calls=2000, max_seconds=240.0, target_relative_ci=0.02)
    report = measure_calls({"bare": bare, "bare" + COPY_SUFFIX: bare, "http": lambda i: post(client, i),
                            "floor": lambda i: post(floor_client, i)}, len(queries), settings=settings, control="bare")
    client.close()
    floor_client.close()
    m = report.models
    bare_ms, http_ms, floor_ms = m["bare"].p50_ms, m["http"].p50_ms, m["floor"].p50_ms
    return {"report": report.to_dict(), "self_check": report.self_check.describe(), "trusted": report.trusted,
            "bare_p50_ms": bare_ms, "http_p50_ms": http_ms, "floor_p50_ms": floor_ms,
            "service_code_p50_ms": http_ms - bare_ms - floor_ms,
            "overhead_p50": http_ms / bare_ms - 1.0 if report.trusted else None}


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


def load_curve(service: Service, queries: list[str], seconds: float) -> list[dict[str, Any]]:
    from care.serve.loadgen import run_load

    rows = []
    for clients in CLIENTS:
        cpu_before, own_before, started = service.cpu_seconds(), time.process_time(), time.perf_counter()
        report = run_load(service.url, queries, clients=clients, duration_s=seconds, k=TOP_K)
        wall = time.perf_counter() - started
        row = {**report.to_dict(), "service_cores_busy": round((service.cpu_seconds() - cpu_before) / wall, 2),
               "load_generator_cores_busy": round((time.process_time() - own_before) / wall, 2),
               "load_average_1min": os.getloadavg()[0]}
        row.pop("errors", None)
        rows.append(row)
        logger.info("%d clients: %s", clients, row)
    return rows


def run_setting(name: str, setting: dict[str, Any], index: Path, onnx: Path, queries: list[str], seconds: float,
                work: Path) -> dict[str, Any]:
    from care.serve.engine import load_engine

    cached = work / f"result-{index.name}-{name}-{int(seconds)}s.json"
    if cached.is_file():
        return json.loads(cached.read_text(encoding="utf-8"))
    engine = load_engine(index, onnx_dir=onnx, int8=True, onnx_threads=setting["threads"])
    with Service(index, onnx, setting, work) as service, FloorService(work) as floor:
        overhead = overhead_at_one_client(engine, service.url, floor.url, queries)
        logger.info("%s: bare p50 %.3f ms, http p50 %.3f ms, transport floor %.3f ms (%s)", name, overhead["bare_p50_ms"],
                    overhead["http_p50_ms"], overhead["floor_p50_ms"], overhead["self_check"])
        curve = load_curve(service, queries, seconds)
    ceiling = bare_ceiling(engine, queries, min(seconds, 20.0))
    result = {"setting": setting, "overhead": overhead, "curve": curve, "bare_ceiling": ceiling}
    cached.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def _split_lines(overhead: dict[str, Any]) -> list[str]:
    """Where the one-client overhead goes (records before the floor was measured have no split)."""
    if overhead.get("floor_p50_ms") is None:
        return []
    return [f"Split: transport floor (a no-op ASGI app under the same uvicorn, same client) p50 "
            f"{overhead['floor_p50_ms']:.3f} ms; the service's own code (validation, batcher hand-off, hits to JSON, "
            f"middleware) {overhead['service_code_p50_ms']:.3f} ms (http − bare − floor)."]


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
        scores={name: {"overhead_p50": r["overhead"]["overhead_p50"], "p99_cliff": _p99_cliff(r["curve"])}
                for name, r in results.items()},
        latencies={name: {"one_client": {k: r["overhead"].get(k) for k in ("bare_p50_ms", "http_p50_ms", "floor_p50_ms",
                                                                           "service_code_p50_ms")},
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
        lines += [f"## max_batch_size={s['max_batch_size']}, max_wait_ms={s['max_wait_ms']}, encoder threads={s['threads']}", "",
                  f"One client, interleaved per query: bare encode + search + lookup p50 {o['bare_p50_ms']:.3f} ms, "
                  f"HTTP p50 {o['http_p50_ms']:.3f} ms → service overhead {overhead} (target ≤ {OVERHEAD_TARGET * 100:.0f} %). "
                  f"{o['self_check']}.", "", *_split_lines(o), "",
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
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "service_load")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args.work.mkdir(parents=True, exist_ok=True)
    onnx = query_encoder(args.work)
    index = index_folder(args.work, args.index_type, json.loads(args.index_options))
    queries = load_queries()
    results = {}
    for text in args.settings.split(","):
        results[text] = run_setting(text, parse_setting(text), index, onnx, queries, args.seconds, args.work)
    write_report(results, args, index, onnx)


if __name__ == "__main__":
    main()
