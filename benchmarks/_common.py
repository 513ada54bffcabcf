"""Where the benchmark scripts find the repository, their records, their working folders and the dev set.

One place for what every script of ``benchmarks/`` locates, so no script hard-codes a machine's path; the
locations are the package's (:mod:`care.bench.locations`), re-exported here:

- :data:`ROOT`: the repository; :data:`RESULTS`: ``benchmarks/results/`` (the records);
  :data:`RUNS`: ``runs/`` (training runs, caches, exports; ignored by git);
- the dev set (``toyhom_neike_sample``, private, outside the repository) comes from ``$CARE_DEV_SET`` only:
  :func:`dev_set` returns its folder or stops the script with a message naming the variable;
  :func:`dev_set_or_none` is for scripts (and tests) that can do without it;
- :func:`portable`: a value for a record's ``config`` with absolute paths rewritten as paths relative to the
  repository or under ``$CARE_DEV_SET``, so records name no machine's folders;
- :func:`add_allow_dirty` / :func:`pin_code`: a script that writes records pins the code at its start
  (:func:`care.bench.record.pin_commit`): a tree with uncommitted changes is refused unless ``--allow-dirty``.

The scripts run as modules from the repository root: ``python -m benchmarks.<name>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from care.bench.locations import (  # noqa: F401 - the drivers' names for the package's locations
    DEV_SET_ENV,
    RESULTS,
    ROOT,
    RUNS,
    dev_set,
    dev_set_or_none,
    portable,
)
from care.bench.record import ALLOW_DIRTY_FLAG, pin_commit


def run_config_parser(description: str, datasets: list[str], work: Path) -> argparse.ArgumentParser:
    """The arguments of a driver that runs ``care run`` on a shipped config per seed: ``--dataset`` (one of
    ``datasets``), ``--seeds``, ``--work`` (the run folders; default ``work``), ``--set KEY=VALUE`` (a config
    field) and ``--results`` (where the record goes)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dataset", choices=sorted(datasets), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--work", type=Path, default=work)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a run config field")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder (a smoke run writes elsewhere)")
    return add_allow_dirty(parser)


def add_allow_dirty(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with ``--allow-dirty`` (start from a tree with uncommitted changes; the records keep the diff's
    SHA-256); returns it."""
    parser.add_argument(ALLOW_DIRTY_FLAG, action="store_true",
                        help="run from a checkout with uncommitted changes (the records keep the diff's SHA-256)")
    return parser


def pin_code(results: Path, args: argparse.Namespace) -> str:
    """Pin the code of this run for every record it writes under ``results`` (at the run's start); refused on a
    dirty tree unless ``args.allow_dirty``. Returns the commit."""
    import sys

    where = Path(sys.argv[0]).stem or "this script"
    return pin_commit(results, allow_dirty=getattr(args, "allow_dirty", False), where=where)
