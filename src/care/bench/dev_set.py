"""Where benchmarks, experiments and tests find the private dev set: ``$CARE_DEV_SET`` only.

The dev set (``toyhom_neike_sample``: ``corpus.jsonl``, ``train.jsonl``, ``test_queries.jsonl``, ...) sits outside
the repository, at another path on every machine, so nothing names its folder but the environment variable
:data:`DEV_SET_ENV` (one of :data:`care.bench.record.DATA_FOLDER_VARIABLES`: records show its paths as
``$CARE_DEV_SET/...``).

- :func:`dev_set_or_none`: its folder, or None when the variable is unset (a test that reads it is skipped then);
- :func:`dev_set`: its folder, or the run stops with a message naming the variable and how to set it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable naming the dev set's folder (``corpus.jsonl``, ``train.jsonl``, ``test_*.jsonl``).
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
