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

With ``--slow-clients N`` (issue 60) it measures slow clients instead, on ``care serve`` with its
default bounds (``ServeConfig.header_timeout_s`` 10 s, ``body_timeout_s`` 30 s) and no API key, with
``--normal-clients`` (1) looping on ``/search`` throughout:

1. N slow sockets held for ``--slow-seconds`` (40: longer than the body's deadline) — half sending a
   request head a byte a second, half a body; each one the server closes is reopened at once, as a
   slowloris attacker does (in a process of their own, as an attacker elsewhere: in this one, their
   event loop would take turns with the normal client's): when the server closed each (seconds after
   connecting), what it answered, how many outlived their deadline, and what ``/metrics`` counted;
2. ``--rounds`` (10) rounds of a ``--seconds`` (4) window without slow sockets and one with a fresh
   pool of N (opened ``POOL_LEAD_S`` before the window, open throughout it), in turn without-first
   and with-first: p50 / p99 / QPS of normal queries side by side, so the machine's drift affects
   both alike; the figure is the median of the rounds' p50 ratios (with / without);
3. ``--hang-ups`` (20) clients that send half a body and hang up: the 5xx and disconnects counted.

Written to ``benchmarks/results/service_hostile/tiny_care_slow_clients.json``.

Usage: ``python -m benchmarks.bench_service_hostile [--clients 32] [--seconds 30] [--hostile-share 0.1]``;
``python -m benchmarks.bench_service_hostile --slow-clients 60 [--seconds 4] [--rounds 10] [--slow-seconds 40]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks._common import RESULTS
from care.bench.record import BenchmarkRecord, write_record
from care.serve.config import ServeConfig
from care.serve.loadgen import run_load, run_mixed_load
from care.serve.server import free_port
from care.serve.slow_clients import KINDS, SlowClients
from care.testing.tiny_model import SAMPLE_QUERIES, make_tiny_care_model, write_corpus

logger = logging.getLogger("bench_service_hostile")

KEY_ENV = "CARE_BENCH_KEY"
KEY = "bench-secret"
STARTUP_S = 120.0
POLL_S = 0.2
SEED = 0
KIB = 1024
WARM_UP_S = 3.0
#: Seconds of each mixed run (clean, hostile), and of each window without slow sockets.
MIXED_RUN_S = 30.0
SLOW_WINDOW_S = 4.0
#: Seconds between two bytes of a slow client.
SLOW_INTERVAL_S = 1.0
#: Seconds a slow socket may outlive its deadline and still count as closed in time: the deadline's timer
#: fires on a loaded event loop, and the close reaches this process's own loop (shared with the normal
#: client's) when it next runs; the body deadlines all expire together with a burst of reopened sockets.
CLOSE_SLACK_S = 2.0
#: Seconds between opening a round's pool of slow sockets and measuring normal traffic beside it.
POOL_LEAD_S = 1.0
#: Seconds to let the server count the hang-ups before /metrics is read.
SETTLE_S = 2.0


def _memory_kib(pid: int) -> dict[str, int]:
    """Resident (VmRSS) and peak resident (VmHWM) memory of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _start_service(index: Path, port: int, api_key: bool = True) -> subprocess.Popen:
    env = {**os.environ, KEY_ENV: KEY, "OMP_NUM_THREADS": "1"}
    key = ["--api-key-env", KEY_ENV] if api_key else []
    proc = subprocess.Popen([sys.executable, "-m", "care.cli", "-q", "serve", "--index", str(index), "--port", str(port),
                             *key, "--threads", "1"], env=env,
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


def _metric_values(url: str, prefix: str) -> dict[str, float]:
    """``{series: value}`` of the service's /metrics lines starting with ``prefix``."""
    text = httpx.get(url + "/metrics", timeout=10).text
    pairs = (line.rsplit(" ", 1) for line in text.splitlines() if line.startswith(prefix))
    return {series: float(value) for series, value in pairs}


def _server_errors(url: str) -> float:
    return sum(v for k, v in _metric_values(url, "care_requests_total").items() if 'status="5' in k)


def _hang_up(port: int) -> None:
    """Half a /search body, then close (a client that goes away mid-request)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: care\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 64\r\n\r\n" + b'{"query": "')


def _window(url: str, args: argparse.Namespace, seconds: float) -> dict:
    report = run_load(url, list(SAMPLE_QUERIES), clients=args.normal_clients, duration_s=seconds, k=10)
    return {"qps": report.qps, "p50_ms": report.p50_ms, "p99_ms": report.p99_ms, "requests": report.requests,
            "status": report.status, "dropped": report.dropped}


def _slow_socket_summary(sockets: list, limits: ServeConfig) -> dict:
    """Per kind: how many sockets, how many the server closed, when (seconds after connecting), what it answered,
    and how many lived past their deadline (+ :data:`CLOSE_SLACK_S`), closed or not."""
    deadline = {"headers": limits.header_timeout_s, "body": limits.body_timeout_s}
    per_kind = {}
    for kind in KINDS:
        mine = [s for s in sockets if s.kind == kind]
        closed = [s.closed_after_s for s in mine if s.closed_after_s is not None]
        per_kind[kind] = {
            "sockets": len(mine), "closed_by_server": len(closed),
            "close_s_min": min(closed, default=None), "close_s_median": statistics.median(closed) if closed else None,
            "close_s_max": max(closed, default=None), "deadline_s": deadline[kind],
            "outlived_deadline": sum(s.open_s > deadline[kind] + CLOSE_SLACK_S for s in mine),
            "answers": dict(Counter(s.answer or "none" for s in mine if s.closed_after_s is not None))}
    return per_kind


def slow_client_record(url: str, port: int, args: argparse.Namespace) -> BenchmarkRecord:
    """Deadlines under a held pool of slow sockets, normal traffic with and without them side by side, hang-ups."""
    limits = ServeConfig()
    queries = list(SAMPLE_QUERIES)
    run_load(url, queries, clients=args.normal_clients, duration_s=WARM_UP_S)  # first calls allocate; not measured
    # 1. the deadlines: a pool of slow sockets held for longer than the body's deadline, each closed one reopened
    with SlowClients(url, n=args.slow_clients, duration_s=args.slow_seconds, interval_s=SLOW_INTERVAL_S,
                     reopen=True, process=True) as slow:
        held = _window(url, args, args.slow_seconds)
    per_kind = _slow_socket_summary(slow.join(), limits)
    timeouts = _metric_values(url, "care_client_timeouts_total")
    logger.info("slow sockets: %s; normal traffic meanwhile: %s", per_kind, held)
    # 2. side by side: rounds of a window without and a window with a fresh pool of slow sockets (open throughout),
    # in turn without-first and with-first, so a drift of the machine's speed favours neither
    rounds = []
    for i in range(args.rounds):
        measured = {}
        for side in (("without", "with") if i % 2 == 0 else ("with", "without")):
            if side == "without":
                measured[side] = _window(url, args, args.seconds)
            else:
                with SlowClients(url, n=args.slow_clients, duration_s=args.seconds + POOL_LEAD_S,
                                 interval_s=SLOW_INTERVAL_S, process=True):
                    time.sleep(POOL_LEAD_S)  # the pool is open: the window measures it held, not its opening
                    measured[side] = _window(url, args, args.seconds)
        rounds.append(measured)
        without, with_slow = measured["without"], measured["with"]
        logger.info("round %d: p50 %.2f ms without, %.2f ms with %d slow sockets", i, without["p50_ms"],
                    with_slow["p50_ms"], args.slow_clients)
    # 3. clients that hang up mid-body: counted apart, never as 5xx
    time.sleep(SETTLE_S)  # the last pool's sockets, closed by the client mid-body, are counted first
    errors_before = _server_errors(url)
    disconnects_before = sum(_metric_values(url, "care_client_disconnects_total").values())
    for _ in range(args.hang_ups):
        _hang_up(port)
    time.sleep(SETTLE_S)
    hang_ups = {"sent": args.hang_ups, "counted_5xx": _server_errors(url) - errors_before,
                "counted_disconnects": sum(_metric_values(url, "care_client_disconnects_total").values())
                - disconnects_before,
                "5xx_whole_run": _server_errors(url)}
    logger.info("hang-ups: %s", hang_ups)
    p50 = {side: statistics.median(r[side]["p50_ms"] for r in rounds) for side in ("without", "with")}
    return BenchmarkRecord(
        experiment="service_hostile", name="tiny_care_slow_clients",
        config={"model": "care.testing.tiny_model tiny CARE (random init)", "normal_clients": args.normal_clients,
                "window_seconds": args.seconds, "rounds": args.rounds, "held_seconds": args.slow_seconds,
                "slow_clients": args.slow_clients, "slow_kinds": list(KINDS), "slow_interval_s": SLOW_INTERVAL_S,
                "close_slack_s": CLOSE_SLACK_S, "hang_ups": args.hang_ups,
                "server": "care serve --threads 1 (own process, default ServeConfig, no API key)",
                "header_timeout_s": limits.header_timeout_s, "body_timeout_s": limits.body_timeout_s},
        seeds=[SEED],
        scores={"slow_sockets": per_kind, "server_timeouts_counted": timeouts, "hang_ups": hang_ups,
                "normal_status": {"held": held["status"],
                                  **{f"round_{i}_{side}": r[side]["status"]
                                     for i, r in enumerate(rounds) for side in r}},
                "normal_dropped": held["dropped"] + sum(r[side]["dropped"] for r in rounds for side in r)},
        latencies={"held": {k: held[k] for k in ("qps", "p50_ms", "p99_ms", "requests")},
                   "rounds": [{side: {k: r[side][k] for k in ("qps", "p50_ms", "p99_ms", "requests")} for side in r}
                              for r in rounds],
                   "p50_median_of_rounds_ms": {side: round(v, 3) for side, v in p50.items()}},
        extra={"p50_medians_with_over_without": round(p50["with"] / p50["without"], 3),
               "round_ratios": (ratios := [round(r["with"]["p50_ms"] / r["without"]["p50_ms"], 3) for r in rounds]),
               "round_ratio_median": round(statistics.median(ratios), 3)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=None,
                        help=f"seconds per run (default {MIXED_RUN_S:g}; with --slow-clients, per window without: "
                             f"{SLOW_WINDOW_S:g})")
    parser.add_argument("--hostile-share", type=float, default=0.10)
    parser.add_argument("--slow-clients", type=int, default=0, help="measure N slow sockets instead (issue 60)")
    parser.add_argument("--slow-seconds", type=float, default=40.0)
    parser.add_argument("--normal-clients", type=int, default=1,
                        help="with --slow-clients: clients looping on /search (1: latency without queueing)")
    parser.add_argument("--hang-ups", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10, help="with --slow-clients: side-by-side rounds")
    args = parser.parse_args()
    args.seconds = args.seconds or (SLOW_WINDOW_S if args.slow_clients else MIXED_RUN_S)
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
        proc = _start_service(index, port, api_key=not args.slow_clients)
        url = f"http://127.0.0.1:{port}"
        try:
            if args.slow_clients:
                path = write_record(slow_client_record(url, port, args), RESULTS)
                print(f"written {path}")
                return
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
