"""How every benchmark script saves its result (:func:`save`) and reads one back (:func:`record`): re-exported
from :mod:`care.bench.reports.records`, where they live, so the drivers' ``from benchmarks.bench_results import
save`` keeps working."""

from __future__ import annotations

from care.bench.reports.records import record, save

__all__ = ["record", "save"]
