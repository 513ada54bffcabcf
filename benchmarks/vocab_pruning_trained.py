"""The served query tower of a budgeted ``care run``, trained, before and after its vocabulary cut (issue 58).

A finished run folder whose ``train_care`` trained CARE (under ``recipes.care.query_speedup``, or with its query tower
named): its CARE model's query tower with the full vocabulary and cut as ``care run`` cuts it
(``recipes.care.prune_query_vocabulary``), test nDCG@10 (fp32, ONNX int8) against the same document vectors, the int8
files' sizes, the unseen test queries' agreement. The logic is :mod:`care.experiments.vocab_pruning_trained`'s.

Writes ``benchmarks/results/frontier/vocab_pruning_trained_<name>.json`` (``care.bench.record``) and ``.md``.

Usage::

    care demo -o runs/demo_speedup5 --set recipes.care.query_speedup=5
    python -m benchmarks.vocab_pruning_trained --run runs/demo_speedup5 --name demo
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from benchmarks._common import RESULTS, ROOT, add_allow_dirty, pin_code
from care.bench.record import write_record
from care.data.io import atomic_write
from care.experiments.vocab_pruning_trained import markdown, measure

logger = logging.getLogger("vocab_pruning_trained")


def main() -> None:
    parser = add_allow_dirty(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument("--run", type=Path, required=True, help="a finished care run that trained CARE")
    parser.add_argument("--name", default="demo", help="the record's name: vocab_pruning_trained_<name>")
    parser.add_argument("--work", type=Path, default=None, help="ONNX exports (default: <run>/vocab_pruning_trained)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--recut", action="store_true", help="cut the run's CARE model again with this code")
    parser.add_argument("--note", default="", help="how the run was made, for the record and its page")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.out, args)
    record = measure(args.run, args.work or args.run / "vocab_pruning_trained", name=args.name, recut=args.recut,
                     note=args.note)
    path = write_record(record, args.out)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(markdown(record, str(path.relative_to(ROOT)))) + "\n")
    logger.info("wrote %s", path)


if __name__ == "__main__":
    main()
