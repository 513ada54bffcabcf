"""The search service under normal clients with 10 % hostile requests among them: no valid request may fail.

A tiny random-init CARE model (``care.testing.tiny_model``) is indexed and served by ``care serve`` in its
own process, with an API key. Two runs of ``--clients`` concurrent clients for ``--seconds`` each:

1. ``clean``: every request valid (``/search`` and ``/embed``), the reference for speed;
2. ``hostile``: each request is hostile with probability ``--hostile-share`` (0.10), drawn from
   :func:`care.serve.loadgen.hostile_kinds` — lone surrogates, NUL, zero-width-only text, bodies
   that are not UTF-8 or are cut-off JSON, an 8 MiB body, a 1M-character instruction, a
   100,000-value filter list — plus an 8 MiB body without the right API key.

Reported per run: valid requests, failures among them (anything but 200, or no answer), QPS and
client-side p50 / p99 of the valid ones, every hostile kind's status codes, and the server's
resident memory before and after (and its peak). Written with ``care.bench.record`` to
``benchmarks/results/service_hostile/tiny_care.json``.

Usage: ``python -m benchmarks.bench_service_hostile [--clients 32] [--seconds 30] [--hostile-share 0.1]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks._common import RESULTS
from care.bench.record import BenchmarkRecord, write_record
from care.serve.loadgen import run_mixed_load
from care.serve.server import free_port
from care.testing.tiny_model import SAMPLE_QUERIES, make_tiny_care_model, write_corpus

logger = logging.getLogger("bench_service_hostile")

KEY_ENV = "CARE_BENCH_KEY"
KEY = "bench-secret"
STARTUP_S = 120.0
POLL_S = 0.2
SEED = 0
KIB = 1024
WARM_UP_S = 3.0


def _memory_kib(pid: int) -> dict[str, int]:
    """Resident (VmRSS) and peak resident (VmHWM) memory of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _start_service(index: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, KEY_ENV: KEY, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "care.cli", "-q", "serve", "--index", str(index), "--port", str(port),
                             "--api-key-env", KEY_ENV, "--threads", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"care serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(POLL_S)
    proc.kill()
    raise RuntimeError("care serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--hostile-share", type=float, default=0.10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would load the client
    from care.index.build import BuildOptions, build

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        model = make_tiny_care_model(tmp_path / "tiny")
        corpus = write_corpus(tmp_path / "corpus.jsonl")
        index = tmp_path / "idx"
        build(BuildOptions(model=str(model), corpus=corpus, output=index, batch_size=8, chunk_size=8))
        port = free_port()
        proc = _start_service(index, port)
        url = f"http://127.0.0.1:{port}"
        try:
            run_mixed_load(url, list(SAMPLE_QUERIES), clients=args.clients, duration_s=WARM_UP_S, hostile_share=0.0,
                           seed=SEED + 1, api_key=KEY)  # first calls allocate; not measured
            memory = {"start": _memory_kib(proc.pid)}
            runs = {}
            for name, share in (("clean", 0.0), ("hostile", args.hostile_share)):
                logger.info("run %s: %d clients, %.0f s, hostile share %.2f", name, args.clients, args.seconds, share)
                report = run_mixed_load(url, list(SAMPLE_QUERIES), clients=args.clients, duration_s=args.seconds,
                                        hostile_share=share, seed=SEED, api_key=KEY)
                runs[name] = report.to_dict()
                memory[f"after_{name}"] = _memory_kib(proc.pid)
                logger.info("%s: %s", name, json.dumps(runs[name], ensure_ascii=False))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    hostile = runs["hostile"]
    scores = {name: {"valid_requests": r["valid_requests"], "valid_failures": r["valid_failures"],
                     "hostile_requests": r["hostile_requests"], "hostile_server_errors": r["hostile_server_errors"],
                     "status": r["status"]} for name, r in runs.items()}
    latencies = {name: {"valid_qps": r["valid_qps"], "valid_p50_ms": r["valid_p50_ms"], "valid_p99_ms": r["valid_p99_ms"]}
                 for name, r in runs.items()}
    record = BenchmarkRecord(
        experiment="service_hostile", name="tiny_care",
        config={"model": "care.testing.tiny_model tiny CARE (random init)", "clients": args.clients, "seconds": args.seconds,
                "hostile_share": args.hostile_share, "api_key": True, "server": "care serve --threads 1 (own process)"},
        seeds=[SEED], scores=scores, latencies=latencies,
        extra={"server_memory_mib": {k: {m: round(v / KIB, 1) for m, v in mem.items()} for k, mem in memory.items()},
               "client_errors_sample": hostile["errors"]})
    path = write_record(record, RESULTS)
    print(f"valid requests with hostile traffic: {hostile['valid_requests']}, failures: {hostile['valid_failures']}; "
          f"hostile requests: {hostile['hostile_requests']}, 5xx among them: {hostile['hostile_server_errors']}")
    for name in runs:
        print(f"{name}: {latencies[name]}")
    print(json.dumps(record.extra["server_memory_mib"]))
    print(f"written {path}")


if __name__ == "__main__":
    main()
