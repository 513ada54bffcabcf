"""Where the reports find the repository and its records.

- :data:`ROOT`: the repository checkout holding this package (``<ROOT>/src/care/bench/reports/paths.py``);
- :data:`RESULTS`: ``<ROOT>/benchmarks/results/`` (one folder per experiment, ``<name>.json`` records).
"""

from __future__ import annotations

from pathlib import Path

#: The repository (this file is ``<ROOT>/src/care/bench/reports/paths.py``).
ROOT = Path(__file__).resolve().parents[4]
#: Every benchmark's records: ``benchmarks/results/<experiment>/<name>.json`` (and ``.md`` beside it).
RESULTS = ROOT / "benchmarks" / "results"

