"""``care serve`` under hostile and slow clients (issues 40 and 60), the logic of ``benchmarks/bench_service_hostile.py``:
the service in its own process (:func:`start_service`), its memory (:func:`memory_kib`), its ``/metrics`` counters,
and the slow-client measurement (:func:`slow_client_record`): a held pool of slow sockets (each closed one reopened),
rounds of normal traffic with and without a fresh pool side by side, and clients that hang up mid-body. The mixed
(hostile-request) load itself is :func:`care.serve.loadgen.run_mixed_load`, the slow sockets
:class:`care.serve.slow_clients.SlowClients`.
"""

from __future__ import annotations

import logging
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from care.bench.record import BenchmarkRecord
from care.bench.service_load.services import wait_healthy
from care.errors import CareError
from care.serve.config import ServeConfig
from care.serve.loadgen import run_load
from care.serve.slow_clients import KINDS, SlowClients

logger = logging.getLogger(__name__)


@dataclass
class HostileSettings:
    """How the hostile and slow-client runs go (the driver's options).

    Attributes:
        queries: the valid queries the clients send.
        clients / seconds / hostile_share: the mixed runs' concurrent clients, seconds each, hostile share.
        slow_clients / slow_seconds: slow sockets in a pool, and how long the held pool lasts.
        normal_clients: clients looping on ``/search`` beside the slow sockets.
        hang_ups: clients that send half a body and hang up.
        rounds: side-by-side rounds (a window without and one with a pool of slow sockets).
    """

    queries: Sequence[str]
    clients: int = 32
    seconds: float = 30.0
    hostile_share: float = 0.10
    slow_clients: int = 0
    slow_seconds: float = 40.0
    normal_clients: int = 1
    hang_ups: int = 20
    rounds: int = 10


KEY_ENV = "CARE_BENCH_KEY"
KEY = "bench-secret"
STARTUP_S = 120.0
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


def memory_kib(pid: int) -> dict[str, int]:
    """Resident (VmRSS) and peak resident (VmHWM) memory of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def start_service(index: Path, port: int, api_key: bool = True) -> subprocess.Popen:
    """``care serve`` over ``index`` on ``port`` in a child process (one thread; with the API key :data:`KEY` in
    ``$CARE_BENCH_KEY`` unless ``api_key`` is off), once it answers ``/health``."""
    env = {**os.environ, KEY_ENV: KEY, "OMP_NUM_THREADS": "1"}
    key = ["--api-key-env", KEY_ENV] if api_key else []
    proc = subprocess.Popen([sys.executable, "-m", "care.cli", "-q", "serve", "--index", str(index), "--port", str(port),
                             *key, "--threads", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}", STARTUP_S, "care serve (see its stderr)")
    except CareError as exc:
        stderr = proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
        proc.kill()
        raise CareError(f"{exc}{': ' + stderr if stderr else ''}") from None
    return proc


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


def _window(url: str, args: HostileSettings, seconds: float) -> dict:
    report = run_load(url, list(args.queries), clients=args.normal_clients, duration_s=seconds, k=10)
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


def slow_client_record(url: str, port: int, args: HostileSettings) -> BenchmarkRecord:
    """Deadlines under a held pool of slow sockets, normal traffic with and without them side by side, hang-ups."""
    limits = ServeConfig()
    queries = list(args.queries)
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


def mixed_record(url: str, pid: int, args: HostileSettings) -> tuple[BenchmarkRecord, dict]:
    """Two runs of ``args.clients`` clients for ``args.seconds`` against the service at ``url`` (process ``pid``, with
    the API key :data:`KEY`): ``clean`` (every request valid) and ``hostile`` (each request hostile with probability
    ``args.hostile_share``); the record and the hostile run's report."""
    from care.serve.loadgen import run_mixed_load

    queries = list(args.queries)
    run_mixed_load(url, queries, clients=args.clients, duration_s=WARM_UP_S, hostile_share=0.0, seed=SEED + 1,
                   api_key=KEY)  # first calls allocate; not measured
    memory = {"start": memory_kib(pid)}
    runs = {}
    for name, share in (("clean", 0.0), ("hostile", args.hostile_share)):
        logger.info("run %s: %d clients, %.0f s, hostile share %.2f", name, args.clients, args.seconds, share)
        runs[name] = run_mixed_load(url, queries, clients=args.clients, duration_s=args.seconds, hostile_share=share,
                                    seed=SEED, api_key=KEY).to_dict()
        memory[f"after_{name}"] = memory_kib(pid)
        logger.info("%s: %s", name, runs[name])
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
               "client_errors_sample": runs["hostile"]["errors"]})
    return record, runs["hostile"]
