"""``benchmarks/service_load.py``'s record (``care.bench.record``) and its markdown report: per setting the
one-client overhead and where it goes (transport floor, the thin service, the service's own ``Server-Timing``
view), the throughput curve and the bare loop's ceiling."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT
from benchmarks.service_load_clients import CLIENTS, N_QUERIES, WARM_ROUNDS

EXPERIMENT = "service_load"
#: Targets of issue 18.
OVERHEAD_TARGET = 0.10


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


def write_report(results: dict[str, Any], args: argparse.Namespace, index: Path, onnx: Path, n_docs: int) -> None:
    """The record and the markdown report of :func:`benchmarks.service_load.run_settings`'s ``results`` over
    ``n_docs`` documents (printed too)."""
    from care.bench.record import BenchmarkRecord, write_record
    from care.data.io import atomic_write

    build = json.loads((index / "build_seconds.json").read_text(encoding="utf-8"))
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=args.name,
        config={"query_encoder": "multilingual-e5-small, 6 strided layers (the e5 student's shape; untrained weights), "
                                 "ONNX int8 (care export-onnx)", "onnx": str(onnx.relative_to(ROOT)),
                "documents": n_docs, "index": args.index_type, "index_options": json.loads(args.index_options),
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
    lines = [f"# The search service under load — {n_docs:,} documents, {args.index_type}, e5 6-layer int8 query encoder", "",
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
