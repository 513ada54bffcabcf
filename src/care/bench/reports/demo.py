"""The generated ``demo-table``: what ``care demo`` scored in its last measured run, from ``bench_demo.py``'s
record ``demo_run/demo.json`` (one row per model, the demo's three tasks and the run's validation split)."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import read_records
from care.bench.reports.paths import RESULTS
from care.bench.tables import markdown_table

#: The record ``python -m benchmarks.bench_demo`` writes.
DEMO_EXPERIMENT, DEMO_RECORD = "demo_run", "demo"
#: The row the share and speed-up columns are relative to.
REFERENCE = "symmetric large"
#: Columns: (score key in the record, column title).
DEMO_COLUMNS: tuple[tuple[str, str], ...] = (
    ("CMedTEB-Demo-Retrieval", "Retrieval nDCG@10"), ("CMedTEB-Demo-Rerank", "Rerank MAP@10"),
    ("CMedTEB-Demo-STS", "STS Pearson"), ("validation", "validation nDCG@10 (held-out training queries)"),
)


def demo_table(results: Path = RESULTS) -> str:
    """One row per model of the last measured ``care demo``, its scores to three decimals (– where not scored), its
    retrieval score as a share of symmetric large's, and its query side's speed-up over symmetric large's in the
    latency step's one engine (both from the record: the run's own figures)."""
    record = read_records(results, DEMO_EXPERIMENT).get(DEMO_RECORD) if (results / DEMO_EXPERIMENT).is_dir() else None
    if record is None:
        return "No demo record yet: run `python -m benchmarks.bench_demo`."
    main = DEMO_COLUMNS[0][0]
    base = (record.scores.get(REFERENCE) or {}).get(main)
    latency = ((record.extra.get("steps") or {}).get("latency") or {}).get("outputs") or {}
    speedups = latency.get("speedups") or {}
    rows = []
    for model, scores in record.scores.items():
        share = f"{scores[main] / base:.1%}" if base and scores.get(main) is not None else None
        speedup = f"{speedups[model]:.2f}×" if speedups.get(model) is not None else None
        rows.append([model, *(f"{scores[key]:.3f}" if scores.get(key) is not None else None for key, _ in DEMO_COLUMNS),
                     share, speedup])
    engine = latency.get("engine") or "one engine"
    return markdown_table(["model", *(title for _, title in DEMO_COLUMNS), f"Retrieval, of {REFERENCE}",
                           f"query speed-up over {REFERENCE} ({engine}, one thread)"], rows)
