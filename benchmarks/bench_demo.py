"""The main job measured: ``care demo --fresh`` with its defaults, timed end to end.

Runs the demo in a child process, then records its wall time, the child's peak resident memory, the
machine's load average, every step's time and the demo's own results table. Writes
``benchmarks/results/care_demo_run.md`` (for people), ``care_demo_run.json`` (the run's manifest plus the
measurements) and ``care_demo_run.png`` (the quality-vs-QPS figure).

Usage::

    python benchmarks/bench_demo.py [--output runs/demo] [-- extra care demo flags]
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

from care.data.io import atomic_write, write_json

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KIB = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "demo", help="the demo's run folder (replaced)")
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
                "cpu_count": os.cpu_count(), "command": "care " + " ".join(command[3:])}
    write_json(RESULTS / "care_demo_run.json", {"measured": measured, **manifest})
    if (args.output / "quality_vs_qps.png").is_file():
        shutil.copyfile(args.output / "quality_vs_qps.png", RESULTS / "care_demo_run.png")
    minutes, seconds = divmod(wall, 60)
    lines = ["# `care demo` — measured end to end", "",
             f"Command: `python benchmarks/bench_demo.py` (runs `{measured['command']}` with the defaults) on "
             f"{measured['cpu_count']} shared CPU cores, no GPU.", "",
             "| wall time | peak memory (max RSS) | 1-min load average before / after |", "|---|---|---|",
             f"| {int(minutes)}:{seconds:04.1f} | {peak_gib:.2f} GiB | {load_before[0]:.1f} / {load_after[0]:.1f} |", "",
             "| step | seconds |", "|---|---|"]
    lines += [f"| {name} | {step.get('seconds', 0):.1f} |" for name, step in manifest["steps"].items()]
    table = (args.output / "results.md").read_text(encoding="utf-8").split("\n", 2)[2]  # drop the title
    lines += ["", table.strip(), "", "Versions: `" + json.dumps(manifest.get("versions", {})) + "`", "",
              "Latencies were measured on shared cores: compare models within this table only. "
              "Full manifest: `care_demo_run.json`; figure: `care_demo_run.png`."]
    with atomic_write(RESULTS / "care_demo_run.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
