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
import tempfile
from pathlib import Path

from benchmarks._common import RESULTS
from care.bench.record import write_record
from care.bench.service_hostile import (
    MIXED_RUN_S,
    SLOW_WINDOW_S,
    HostileSettings,
    mixed_record,
    slow_client_record,
    start_service,
)
from care.serve.server import free_port
from care.testing.tiny_model import SAMPLE_QUERIES, make_tiny_care_model, write_corpus

logger = logging.getLogger("bench_service_hostile")


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
    settings = HostileSettings(queries=list(SAMPLE_QUERIES), clients=args.clients,
                               seconds=args.seconds or (SLOW_WINDOW_S if args.slow_clients else MIXED_RUN_S),
                               hostile_share=args.hostile_share, slow_clients=args.slow_clients,
                               slow_seconds=args.slow_seconds, normal_clients=args.normal_clients,
                               hang_ups=args.hang_ups, rounds=args.rounds)
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
        proc = start_service(index, port, api_key=not args.slow_clients)
        url = f"http://127.0.0.1:{port}"
        try:
            if args.slow_clients:
                print(f"written {write_record(slow_client_record(url, port, settings), RESULTS)}")  # noqa: T201
                return
            record, hostile = mixed_record(url, proc.pid, settings)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    path = write_record(record, RESULTS)
    print(f"valid requests with hostile traffic: {hostile['valid_requests']}, failures: {hostile['valid_failures']}; "  # noqa: T201
          f"hostile requests: {hostile['hostile_requests']}, 5xx among them: {hostile['hostile_server_errors']}")
    for name, latency in record.latencies.items():
        print(f"{name}: {latency}")  # noqa: T201
    print(json.dumps(record.extra["server_memory_mib"]))  # noqa: T201
    print(f"written {path}")  # noqa: T201


if __name__ == "__main__":
    main()
