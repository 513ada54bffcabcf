"""The record (``care.bench.record``) and markdown report of one ``care bench service-load`` run.

The record's ``extra.served_over_bare`` and ``extra.throughput_of_ceiling`` are the first variant's (issue 59's
targets: at most :data:`SERVED_TARGET` and at least :data:`THROUGHPUT_TARGET`); ``extra.variants`` holds every
variant's pair, and ``extra.gain_over`` each other variant's ratios over the first's, measured side by side.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from care.bench.record import BenchmarkRecord, portable_path, write_record
from care.bench.service_load.config import VARIANTS, ServiceLoadConfig

EXPERIMENT = "service_load"
#: Issue 59's targets: HTTP p50 at one client <= 1.25x the bare loop; q/s at 64 clients >= 80 % of its ceiling.
SERVED_TARGET = 1.25
THROUGHPUT_TARGET = 0.8


def back_to_back(latencies: dict[str, Any], variant: str) -> float | None:
    """``variant``'s p50 at the curve's one-client level over the bare loop's p50 in batches of one: each stream back
    to back on its own, so the service's caches stay warm between its requests (the interleaved one-client timing
    starts each request after the bare loop and the other variants evicted them). None when either was not run."""
    level = next((row for row in latencies["curves"].get(variant, []) if row["clients"] == 1), None)
    bare = latencies["bare_ceiling"]["batches"].get("1")
    if level is None or bare is None or not bare["batch_p50_ms"]:
        return None
    return round(level["p50_ms"] / bare["batch_p50_ms"], 4)


def build_record(name: str, config: ServiceLoadConfig, result: dict[str, Any], setup: dict[str, Any]) -> BenchmarkRecord:
    """The record of ``result`` (:func:`~care.bench.service_load.measure.run_measurement`); ``setup`` describes the
    encoder and index (goes to ``config``)."""
    variants = list(result["ratios"])
    first = variants[0]
    one = result["one_client"]
    gains = {other: {"http_p50_before_over_after": round(one["variants"][other]["http_p50_ms"]
                                                          / one["variants"][first]["http_p50_ms"], 4),
                     "qps_after_over_before": round(result["curves"][first][-1]["qps"]
                                                    / max(result["curves"][other][-1]["qps"], 1e-9), 4)}
             for other in variants[1:]}
    ratios = result["ratios"][first]
    return BenchmarkRecord(
        experiment=EXPERIMENT, name=name,
        config={**{key: portable_path(value) if isinstance(value, str) else value for key, value in config.to_dict().items()},
                **setup, "variant_changes": {v: VARIANTS.get(v, {}) for v in variants}},
        scores={v: result["ratios"][v] for v in variants},
        latencies={"one_client": one, "curves": result["curves"], "bare_ceiling": result["ceiling"]},
        extra={"served_over_bare": ratios["served_over_bare"], "throughput_of_ceiling": ratios["throughput_of_ceiling"],
               "app_over_bare": one["variants"][first].get("app_over_bare"),
               "served_over_bare_back_to_back": back_to_back({"curves": result["curves"], "bare_ceiling": result["ceiling"]},
                                                             first),
               "of_variant": first, "variants": result["ratios"], "gain_over": gains,
               "targets": {"served_over_bare": SERVED_TARGET, "throughput_of_ceiling": THROUGHPUT_TARGET},
               "met": {"served_over_bare": ratios["served_over_bare"] <= SERVED_TARGET,
                       "throughput_of_ceiling": ratios["throughput_of_ceiling"] >= THROUGHPUT_TARGET},
               "load_average_1min_at_end": round(os.getloadavg()[0], 2)})


def markdown(record: BenchmarkRecord, path: Path | None = None) -> str:
    """The report of a service-load record: the one-client table, the curves, the ceiling, the targets."""
    one, extra = record.latencies["one_client"], record.extra
    ceiling = record.latencies["bare_ceiling"]
    lines = [f"# `care serve` against the bare loop — {record.name}", "",
             f"Encoder: {record.config.get('encoder', record.config.get('model'))}. Index: "
             f"{record.config.get('index_description', record.config.get('index'))}. Threads: {record.config['threads']} "
             f"(services and bare loop alike). Services in their own processes on the same cores as the clients; "
             f"variants side by side in one run: {', '.join(f'`{v}` {VARIANTS.get(v, {})}' for v in extra['variants'])}.",
             "", f"## One client, interleaved per query ({one['calls']} calls each; {one['self_check']})", "",
             "| variant | HTTP p50 ms | HTTP p90 ms | served / bare | Server-Timing p50 ms (app, search) | app / bare |",
             "|---|---|---|---|---|---|",
             f"| bare loop (encode + search + lookup, no HTTP) | {one['bare_p50_ms']:.3f} | {one['bare_p90_ms']:.3f} | 1 | | |"]
    for name, v in one["variants"].items():
        timing, inside = v["server_timing_p50_ms"], v.get("app_over_bare")
        lines.append(f"| `{name}` | {v['http_p50_ms']:.3f} | {v['http_p90_ms']:.3f} | {v['served_over_bare']:.3f} | "
                     f"{timing.get('app', '–')}, {timing.get('search', '–')} | {'–' if inside is None else f'{inside:.3f}'} |")
    batches = ", ".join(f"batches of {b}: {v['qps']} q/s" for b, v in ceiling["batches"].items())
    lines += ["", f"## Throughput (ceiling: the bare loop in one process, {batches}; best {ceiling['ceiling_qps']} q/s)", "",
              "| variant | clients | q/s | of ceiling | p50 ms | p99 ms | non-200 | service cores | client cores | load avg |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, curve in record.latencies["curves"].items():
        for row in curve:
            bad = sum(n for code, n in row["status"].items() if code != "200") + row["dropped"]
            lines.append(f"| `{name}` | {row['clients']} | {row['qps']} | {row['qps'] / ceiling['ceiling_qps']:.3f} | "
                         f"{row['p50_ms']} | {row['p99_ms']} | {bad} | {row['service_cores_busy']} | "
                         f"{row['client_cores_busy']} | {row['load_average_1min']} |")
    met = extra["met"]
    lines += ["", f"## Targets (issue 59), variant `{extra['of_variant']}`", "",
              f"- served / bare (one client, p50): **{extra['served_over_bare']:.3f}** (target ≤ {SERVED_TARGET}): "
              f"{'met' if met['served_over_bare'] else 'not met'}",
              f"- q/s at {record.latencies['curves'][extra['of_variant']][-1]['clients']} clients / ceiling: "
              f"**{extra['throughput_of_ceiling']:.3f}** (target ≥ {THROUGHPUT_TARGET}): "
              f"{'met' if met['throughput_of_ceiling'] else 'not met'}"]
    warm = back_to_back(record.latencies, extra["of_variant"])
    if warm is not None:
        lines.append(f"- served / bare back to back (the one-client level's p50 / the bare loop's batch-of-one p50, "
                     f"each stream on its own, caches warm; not the target's measure, which interleaves): {warm:.3f}")
    for other, gain in extra["gain_over"].items():
        lines.append(f"- against `{other}` in the same run: HTTP p50 {other} / {extra['of_variant']} = "
                     f"{gain['http_p50_before_over_after']:.3f}; q/s {extra['of_variant']} / {other} = "
                     f"{gain['qps_after_over_before']:.3f}")
    lines += ["", f"Load average (1 min) at the end: {extra['load_average_1min_at_end']} on {record.machine.get('cores')} "
              "cores: the cores were shared with other jobs; only ratios measured side by side in this run compare.",
              "", f"Command: `{record.command}` (commit {record.commit})" + (f"; record `{path}`." if path else ".")]
    return "\n".join(lines) + "\n"


def write_report(record: BenchmarkRecord, results: Path) -> Path:
    """Write the record under ``results/service_load/`` and its ``.md`` beside it; returns the record's path."""
    from care.data.io import atomic_write

    path = write_record(record, results)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(markdown(record, path.relative_to(results.parent.parent) if path.is_relative_to(results.parent.parent)
                          else path.name))
    return path
