"""The quality-latency frontier of CARE's query tower on real weights (issue 41): ``python -m benchmarks.frontier``.

Reads the ``real_weights`` records (``test_gpu_seedK``, ``test_frontier_seedK``, ``test_frontier_rich_seedK``, the
discovered ``test_frontier_<tag>_seedK``, and ``--group TAG``'s) and the side-by-side CPU latency in
``test_frontier``; BM25's point from ``baselines/reference_models``. Writes ``frontier/test.json``, ``test.md`` and
``frontier.png``. The logic is the package's: :mod:`care.bench.reports.frontier_towers` (which label is which
tower, the groups), :mod:`care.bench.reports.frontier_build` (the record), :mod:`care.bench.reports.frontier_report`
(the Markdown and the figure); ``care bench report frontier`` rewrites the .md and .png from the record alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from care.bench.record import read_records, write_record
from care.bench.reports.frontier_build import build
from care.bench.reports.frontier_report import FIGURE_NAME, figure, markdown
from care.bench.reports.frontier_towers import (
    BM25_RECORD,
    BM25_SOURCE,
    E5_CONFIG,
    EXPERIMENT,
    SOURCE,
    VARIANTS,
    named_groups,
    read_shapes,
)
from care.bench.reports.paths import RESULTS
from care.data.io import atomic_write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="results root holding real_weights/")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results root the frontier/ record goes to")
    parser.add_argument("--e5-config", type=Path, default=E5_CONFIG, help="e5's config.json (parameter counts)")
    parser.add_argument("--variant", action="append", default=None, help=f"CARE [NAME] rows to include {VARIANTS}")
    parser.add_argument("--group", action="append", default=None, metavar="TAG",
                        help="also read the records test_<TAG>_seedK (a run's --tag, e.g. cpu_rich_lr2.4e-3_L1)")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args()
    shapes = read_shapes(args.e5_config)
    if shapes is None:
        shapes = next((r.config["e5_shapes"] for r in read_records(args.out, EXPERIMENT).values()
                       if r.config.get("e5_shapes")), None)  # the shapes a previous run recorded
    baselines = (read_records(args.results, BM25_SOURCE).get(BM25_RECORD) if (args.results / BM25_SOURCE).is_dir()
                 else None)
    record = build(read_records(args.results, SOURCE), shapes, variants=tuple(args.variant or VARIANTS),
                   extra_groups=named_groups(args.group), baselines=baselines)
    path = write_record(record, args.out)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(markdown(record))
    if not args.no_figure:
        figure(record, path.parent / FIGURE_NAME)
    print(markdown(record))  # noqa: T201 - the script's report


if __name__ == "__main__":
    main()
