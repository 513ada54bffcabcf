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

Writes ``benchmarks/results/service_load/<name>.json`` (``care.bench.record``) and ``.md``
(``benchmarks/service_load_report.py``); the services in child processes and the clients that measure them
are ``benchmarks/service_load_clients.py``, the load generator :func:`care.serve.loadgen.run_load`.

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
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RUNS, dev_set
from benchmarks.service_load_clients import (
    CLIENTS,
    N_QUERIES,
    Service,
    bare_ceiling,
    floor_service,
    load_level,
    overhead_at_one_client,
    search_answer,
    thin_service,
)
from benchmarks.service_load_report import write_report

logger = logging.getLogger("service_load")

N_DOCS = 100_000


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
    write_report(results, args, index, onnx, N_DOCS)


if __name__ == "__main__":
    main()
