"""Does cutting the query tower's vocabulary to the domain's make it answer faster? (issue 41, "vocabulary pruning")

The full and the dev-set vocabulary of multilingual-e5-small (``care model export-e5 --vocab-from`` the dev set's
corpus and training pairs) at strided depths, exported to ONNX int8: the two vocabularies' agreement on unseen test
queries, single-query latency side by side, file sizes and parameters, and test nDCG@10 at 12 layers against e5's
passage vectors. The logic is :mod:`care.experiments.vocab_pruning`'s.

Writes ``benchmarks/results/frontier/vocab_pruning.json`` (``care.bench.record``) and ``.md``.

Usage::

    python -m benchmarks.vocab_pruning --data $CARE_DEV_SET [--layers 1 2 12] [--ffn-width 768]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # every engine on one thread, before torch loads

import argparse
import logging
from pathlib import Path

from care.bench.locations import RESULTS, ROOT, RUNS, dev_set
from care.bench.record import write_record
from care.data.io import atomic_write
from care.experiments.vocab_pruning import markdown, measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 12], help="query-tower depths (12 included)")
    parser.add_argument("--ffn-width", type=int, nargs="*", default=[],
                        help="also time each depth below 12 with its feed-forward blocks narrowed to these widths")
    parser.add_argument("--work", type=Path, default=RUNS / "vocab_pruning")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    record, report, test_queries = measure(args.data or dev_set(), args.layers, args.ffn_width, args.work)
    path = write_record(record, args.out)
    lines = markdown(record, report, test_queries, str(path.relative_to(ROOT)))
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
