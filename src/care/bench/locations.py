"""Where benchmark drivers find the repository, their records, their working folders and the dev set.

One place for what every driver of ``benchmarks/`` locates, so no driver hard-codes a machine's path:

- :data:`ROOT`: the repository; :data:`RESULTS`: ``benchmarks/results/`` (the records);
  :data:`RUNS`: ``runs/`` (training runs, caches, exports; ignored by git); :data:`CONFIGS`: ``configs/``;
- the dev set (``toyhom_neike_sample``, private, outside the repository) comes from ``$CARE_DEV_SET`` only:
  :func:`dev_set` returns its folder or stops the driver with a message naming the variable;
  :func:`dev_set_or_none` is for drivers (and tests) that can do without it;
- :func:`portable`: a value for a record's ``config`` with absolute paths rewritten as paths relative to the
  repository or under ``$CARE_DEV_SET``, so records name no machine's folders.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from care.bench.record import portable_path
from care.bench.reports.paths import RESULTS, ROOT  # the repository and its records (one definition)

__all__ = ["CONFIGS", "DEV_SET_ENV", "RESULTS", "ROOT", "RUNS", "dev_set", "dev_set_or_none", "portable"]

#: Where the drivers keep their training runs, caches and exports (ignored by git).
RUNS = ROOT / "runs"
#: The repository's training recipes (``care_tiny``, ``care_paper``, ``pretrain``, ...).
CONFIGS = ROOT / "configs"
#: The environment variable naming the dev set's folder (``corpus.jsonl``, ``train.jsonl``, ``test_*.jsonl``);
#: one of :data:`care.bench.record.DATA_FOLDER_VARIABLES`, so records show its paths as ``$CARE_DEV_SET/...``.
DEV_SET_ENV = "CARE_DEV_SET"


def dev_set_or_none() -> Path | None:
    """The folder ``$CARE_DEV_SET`` names, or None when the variable is unset or empty."""
    value = os.environ.get(DEV_SET_ENV, "").strip()
    return Path(value).expanduser() if value else None


def dev_set() -> Path:
    """The dev set's folder from ``$CARE_DEV_SET``.

    Raises:
        SystemExit: naming the variable when it is unset, or when the folder it names does not exist.
    """
    folder = dev_set_or_none()
    if folder is None:
        raise SystemExit(f"this benchmark needs the dev set: set ${DEV_SET_ENV} to its folder "
                         f"(the one holding corpus.jsonl, train.jsonl and test_queries.jsonl), e.g. "
                         f"{DEV_SET_ENV}=/path/to/toyhom_neike_sample python -m benchmarks.<script> ...")
    if not folder.is_dir():
        raise SystemExit(f"${DEV_SET_ENV} is {folder}, which is not a folder: set it to the dev set's folder")
    return folder


def portable(value: Any) -> Any:
    """``value`` (a path, string, list or dict of them) with every absolute path under the dev set written
    ``$CARE_DEV_SET/...`` and every one under the repository written relative to it
    (:func:`care.bench.record.portable_path`); anything else unchanged."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    if not isinstance(value, (str, Path)):
        return value
    return portable_path(str(value), ROOT)
