"""The embedded demo benchmark (CMedTEB-Demo) and demo training data shipped inside the package.

A small Chinese medical benchmark written for this project: doctor-style answers and patient
questions on common conditions across departments with graded qrels, a rerank set, synonym
STS pairs, and disjoint training rows. ``care.demo.build`` regenerates it deterministically.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from care.demo.tasks import RERANK_TASK, RETRIEVAL_TASK, STS_TASK, TRAIN_FILE, TRAIN_FOLDER
from care.errors import CareError

DATA_FOLDER = "data"
DEMO_TASK_NAMES: tuple[str, ...] = (RETRIEVAL_TASK, RERANK_TASK, STS_TASK)


def demo_tasks_root() -> Path:
    """The installed folder holding the demo task folders (one per name in ``DEMO_TASK_NAMES``).

    Raises:
        CareError: the package is installed in a form without a real folder (e.g. a zip).
    """
    root = files("care.demo").joinpath(DATA_FOLDER)
    path = Path(str(root))
    if not path.is_dir():
        raise CareError(
            f"the demo data folder {path} is missing; reinstall care-retrieval from a wheel or source tree "
            "(or regenerate it with `python -m care.demo.build --output src/care/demo/data`)"
        )
    return path


def demo_task_folders() -> list[Path]:
    """The installed demo task folders, sorted by name (what ``care bench`` runs without ``--task``)."""
    root = demo_tasks_root()
    return sorted(root / name for name in DEMO_TASK_NAMES)


def demo_train_file() -> Path:
    """The demo training file (``{"query", "pos", "neg"}`` JSONL, disjoint from the benchmark)."""
    return demo_tasks_root() / TRAIN_FOLDER / TRAIN_FILE


__all__ = ["DEMO_TASK_NAMES", "demo_task_folders", "demo_tasks_root", "demo_train_file"]
