"""How a benchmark saves its result and how a table reads one back.

:func:`save` writes ``benchmarks/results/<experiment>/<name>.json`` through :func:`care.bench.record.write_record`
(command, commit, date, machine and load filled in) and, when given, ``<name>.md`` for people; the README and docs
tables are generated from these records (``care bench report``), each read by :func:`record`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from care.bench.record import BenchmarkRecord, read_records, write_record
from care.bench.reports.paths import RESULTS
from care.data.io import atomic_write


def save(experiment: str, name: str, *, config: dict[str, Any], scores: dict[str, Any], seeds: list[int] | None = None,
         latencies: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
         markdown: str | None = None, results: Path = RESULTS) -> Path:
    """Write the record (and ``markdown`` as ``<name>.md``); returns the JSON's path."""
    record = BenchmarkRecord(experiment, name, config=config, seeds=list(seeds or []), scores=scores,
                             latencies=latencies or {}, extra=extra or {})
    path = write_record(record, results)
    if markdown is not None:
        with atomic_write(path.with_suffix(".md")) as fh:
            fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return path


def record(experiment: str, name: str, results: Path = RESULTS) -> BenchmarkRecord:
    """The record ``<results>/<experiment>/<name>.json``.

    Raises:
        SystemExit: naming the record when it is missing (run the benchmark that writes it).
    """
    records = read_records(results, experiment)
    if name not in records:
        raise SystemExit(f"no record {experiment}/{name}.json under {results}")
    return records[name]
