"""The main job measured: ``care demo --fresh`` with its defaults, timed end to end.

Runs the demo in a child process, then records its wall time, the child's peak resident memory, the
machine's load average, every step's time and the demo's own results table. Writes
``benchmarks/results/demo_run/demo.json`` (``care.bench.record``: the demo's settings, every model's scores
and latency, the measurements and step timings), ``demo.md`` (for people) and ``demo.png`` (the
quality-vs-QPS figure).

Usage::

    python -m benchmarks.bench_demo [--output runs/demo] [-- extra care demo flags]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import RESULTS, RUNS, portable
from benchmarks.bench_results import save

EXPERIMENT, NAME = "demo_run", "demo"
KIB = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=RUNS / "demo", help="the demo's run folder (replaced)")
    parser.add_argument("extra", nargs="*", help="more care demo flags, after --")
    args = parser.parse_args()
    command = [sys.executable, "-c", "from care.cli import main; main()", "demo", "--output", str(args.output),
               "--fresh", "--no-progress", *args.extra]
    load_before = os.getloadavg()
    started = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - started
    load_after = os.getloadavg()
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * KIB / 2**30  # ru_maxrss: KiB on Linux
    manifest = json.loads((args.output / "manifest.json").read_text(encoding="utf-8"))
    measured = {"wall_seconds": round(wall, 1), "peak_rss_gib": round(peak_gib, 2),
                "load_average_1min_before": load_before[0], "load_average_1min_after": load_after[0],
                "cpu_count": os.cpu_count(), "command": "care " + " ".join(map(str, portable(command[3:])))}
    figure = RESULTS / EXPERIMENT / f"{NAME}.png"
    if (args.output / "quality_vs_qps.png").is_file():
        figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.output / "quality_vs_qps.png", figure)
    minutes, seconds = divmod(wall, 60)
    lines = ["# `care demo` — measured end to end", "",
             f"Command: `python -m benchmarks.bench_demo` (runs `{measured['command']}` with the defaults) on "
             f"{measured['cpu_count']} shared CPU cores, no GPU.", "",
             "| wall time | peak memory (max RSS) | 1-min load average before / after |", "|---|---|---|",
             f"| {int(minutes)}:{seconds:04.1f} | {peak_gib:.2f} GiB | {load_before[0]:.1f} / {load_after[0]:.1f} |", "",
             "| step | seconds |", "|---|---|"]
    lines += [f"| {name} | {step.get('seconds', 0):.1f} |" for name, step in manifest["steps"].items()]
    table = (args.output / "results.md").read_text(encoding="utf-8").split("\n", 2)[2]  # drop the title
    lines += ["", table.strip(), "", "Versions: `" + json.dumps(manifest.get("versions", {})) + "`", "",
              "Latencies were measured on shared cores: compare models within this table only. "
              f"Full manifest: `{NAME}.json`; figure: `{NAME}.png`."]
    results = json.loads((args.output / "results.json").read_text(encoding="utf-8"))
    save(EXPERIMENT, NAME, config=portable(manifest["config"]), seeds=[manifest["config"]["seed"]],
         scores={row["model"]: row["scores"] for row in results["rows"]},
         latencies={row["model"]: {"median_ms": row["query_latency_ms"]} for row in results["rows"]
                    if row["query_latency_ms"] is not None},
         extra={"measured": measured, "steps": portable(manifest["steps"]), "versions": manifest.get("versions", {}),
                "ranking": results.get("ranking", [])},
         markdown="\n".join(lines))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
