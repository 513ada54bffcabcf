"""The generated ``results-index``: every record, the command that wrote it, its commit and date."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import read_records
from care.bench.reports.paths import RESULTS
from care.bench.tables import markdown_table


def results_index(results: Path = RESULTS) -> str:
    """Every record: experiment / name, the command that wrote it, its commit and date."""
    rows = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        for name, rec in read_records(results, folder.name).items():
            link = f"[`{folder.name}/{name}`](../benchmarks/results/{folder.name}/{name}.json)"
            rows.append([link, f"`{rec.command}`", rec.commit[:10], rec.date[:10]])
    return markdown_table(["record", "command", "commit", "date"], rows)
