"""Write a model folder atomically: build it in a temporary sibling, then rename it into place."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from care.data.io import NEW_DIR_MODE, require_folder_path


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; on success it replaces ``path`` (old content removed).

    On an exception the temporary folder is deleted and ``path`` is left as it was, so a crash never
    leaves a half-written model where a complete one is expected.

    Raises:
        CareError: ``path`` is an existing file (it would have been moved to a hidden ``.NAME.old``).
    """
    path = require_folder_path(path, "the model folder", "give a folder path for the model (or move the file away)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp.chmod(NEW_DIR_MODE)  # mkdtemp's 0o700 would stay on the renamed folder
    try:
        yield tmp
        if path.exists():
            backup = path.with_name(f".{path.name}.old")
            shutil.rmtree(backup, ignore_errors=True)
            os.replace(path, backup)
            os.replace(tmp, path)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
