"""Regenerate the result tables of the README and the docs: a shim over ``care bench report``
(:mod:`care.bench.reports.sections`), kept so ``python -m benchmarks.tables [--check]`` still works."""

from __future__ import annotations

import sys

from care.bench.reports.cli import report_main

if __name__ == "__main__":
    raise SystemExit(report_main(check="--check" in sys.argv[1:]))
