"""Task registry: named tasks (the CMedTEB five, C-MTEB medical tasks) and folders as tasks.

``get_task(name_or_folder)`` resolves, in order:

1. a folder path: ``task.json`` inside it is the metadata; without one the type is inferred from
   the files (``corpus.jsonl`` + ``queries.jsonl`` + qrels -> retrieval, ``rerank.jsonl`` ->
   rerank, ``sts.jsonl`` -> sts) and the folder name is the task name. Qrels are ``qrels.tsv``,
   ``{split}_qrels.tsv`` or BEIR's ``qrels/{split}.tsv``; a folder without ``qrels.tsv`` evaluates
   ``test`` (BEIR's evaluation split) or its only split;
2. a registered name: its data folder is ``<data_root>/<name>`` (``data_root`` defaults to
   ``$CMEDTEB_DATA``);
3. otherwise a :class:`CareError` with close matches.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from care.bench.task import RERANK_FILE, RETRIEVAL_FILES, STS_FILE, TASK_FILE, TaskMetadata
from care.data.retrieval import available_splits, default_split
from care.errors import CareError

#: Environment variable naming the folder that holds one subfolder per registered task.
DATA_ROOT_ENV = "CMEDTEB_DATA"
CLOSE_MATCHES = 3

_REGISTRY: dict[str, TaskMetadata] = {}
#: Extra guidance shown when a registered task's data is missing (e.g. how to get public data).
_DATA_HINTS: dict[str, str] = {}
#: Fallback data sources tried when ``<data_root>/<name>`` is missing (e.g. the HF datasets cache).
_RESOLVERS: dict[str, Callable[[], Path | None]] = {}


def register_task(
    meta: TaskMetadata,
    *,
    data_hint: str | None = None,
    resolver: Callable[[], Path | None] | None = None,
    overwrite: bool = False,
) -> TaskMetadata:
    """Add a task to the registry.

    Args:
        meta: the task; its ``path`` may be ``None`` (the data root is given at run time).
        data_hint: extra text for the "data not found" error (e.g. where public data comes from).
        resolver: called when ``<data_root>/<name>`` is missing; returns a task folder or ``None``.
        overwrite: replace an existing registration of the same name.
    """
    if meta.name in _REGISTRY and not overwrite and _REGISTRY[meta.name] != meta:
        raise CareError(f"task {meta.name!r} is already registered")
    _REGISTRY[meta.name] = meta
    if data_hint:
        _DATA_HINTS[meta.name] = data_hint
    if resolver is not None:
        _RESOLVERS[meta.name] = resolver
    return meta


def list_tasks() -> list[TaskMetadata]:
    """All registered tasks, sorted by name."""
    _ensure_builtin()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


_BUILTIN_REGISTERED: list[bool] = []


def _ensure_builtin() -> None:
    """Register the built-in tasks once: the CMedTEB five, then the C-MTEB tasks with public data."""
    if _BUILTIN_REGISTERED:
        return
    from care.bench.cmedteb import CMEDTEB_TASKS
    from care.bench.mteb_cmteb import public_task_registrations

    for meta in CMEDTEB_TASKS:
        register_task(meta, overwrite=True)
    for meta, hint, resolver in public_task_registrations():
        register_task(meta, data_hint=hint, resolver=resolver, overwrite=True)
    _BUILTIN_REGISTERED.append(True)


def infer_task(folder: str | Path) -> TaskMetadata:
    """Metadata for a task folder: its ``task.json``, or inferred from the files it holds."""
    folder = Path(folder)
    task_file = folder / TASK_FILE
    if task_file.is_file():
        return TaskMetadata.from_task_file(task_file)
    name = folder.resolve().name
    if all((folder / f).is_file() for f in RETRIEVAL_FILES):
        return TaskMetadata(name=name, type="retrieval", path=folder)
    if all((folder / f).is_file() for f in RETRIEVAL_FILES[:2]) and available_splits(folder):
        split = default_split(folder)
        if split is None:
            raise CareError(f"{folder}: a retrieval folder without {RETRIEVAL_FILES[2]} and with several splits "
                            f"({', '.join(available_splits(folder))}); choose one with --split")
        return TaskMetadata(name=name, type="retrieval", path=folder, split=split)
    if (folder / RERANK_FILE).is_file():
        return TaskMetadata(name=name, type="rerank", path=folder)
    if (folder / STS_FILE).is_file():
        return TaskMetadata(name=name, type="sts", path=folder)
    present = sorted(p.name for p in folder.iterdir())[:10]
    raise CareError(
        f"{folder}: not a task folder (found {present or 'nothing'}); a task folder holds {TASK_FILE}, or "
        f"{' + '.join(RETRIEVAL_FILES)} (retrieval; or qrels/<split>.tsv as BEIR publishes it), or {RERANK_FILE} "
        f"(rerank), or {STS_FILE} (sts)"
    )


def split_files_of(task: TaskMetadata) -> list[Path]:
    """The files ``task`` reads for its split (so that a missing split is refused before any model loads).

    Raises:
        CareError: the task names a split its folder has no file for (the message lists the splits it has).
    """
    from care.data.errors import DataFormatError
    from care.data.retrieval import split_files

    if task.path is None:
        return []
    if task.type == "retrieval":
        try:
            return list(split_files(task.path, task.split))
        except DataFormatError as exc:
            raise CareError(f"task {task.name!r}: {exc}") from None
    base = RERANK_FILE if task.type == "rerank" else STS_FILE
    if not task.split:
        return [task.path / base]
    candidate = task.path / f"{task.split}_{base}"
    if not candidate.is_file():
        others = sorted(p.name[: -len("_" + base)] for p in task.path.glob(f"*_{base}"))
        has = f"its splits are: {', '.join(others)}" if others else f"it has only the default {base}"
        raise CareError(f"task {task.name!r}: no {candidate.name} in {task.path} for split {task.split!r}; "
                        f"{has} — pick one of those or leave --split out")
    return [candidate]


def resolve_data_root(data_root: str | Path | None) -> Path | None:
    if data_root is not None:
        return Path(data_root).expanduser()
    env = os.environ.get(DATA_ROOT_ENV)
    return Path(env).expanduser() if env else None


def get_task(name_or_folder: str | Path, data_root: str | Path | None = None) -> TaskMetadata:
    """Resolve a task name or folder to metadata whose ``path`` points at existing data.

    Raises:
        CareError: unknown name (with close matches), or a registered task whose data folder is
            missing (saying where it looked and how to point care at the data).
    """
    _ensure_builtin()
    candidate = Path(name_or_folder).expanduser()
    if candidate.is_dir():
        return infer_task(candidate)
    name = str(name_or_folder)
    if name not in _REGISTRY:
        suggestions = difflib.get_close_matches(name, list(_REGISTRY), n=CLOSE_MATCHES, cutoff=0.5)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise CareError(
            f"unknown task {name!r} (and no such folder).{hint} Registered tasks: {', '.join(sorted(_REGISTRY))}; "
            "or pass a task folder path."
        )
    meta = _REGISTRY[name]
    if meta.path is not None and meta.path.is_dir():
        return meta
    root = resolve_data_root(data_root)
    where = [f"no data root given (--data-root or ${DATA_ROOT_ENV})"]
    if root is not None:
        folder = root / name
        where = [f"looked in {folder}"]
        if folder.is_dir():
            if (folder / TASK_FILE).is_file():
                found = TaskMetadata.from_task_file(folder / TASK_FILE)
                return replace(meta, path=found.path, split=found.split or meta.split)
            return meta.with_path(folder)
    resolver = _RESOLVERS.get(name)
    if resolver is not None:
        resolved = resolver()
        if resolved is not None:
            return meta.with_path(resolved)
        where.append("not in the local Hugging Face datasets cache either")
    extra = _DATA_HINTS.get(name, "")
    raise CareError(
        f"data for task {name!r} not found: {'; '.join(where)}. Put the task's files in <data-root>/{name}/ "
        f"(formats: docs/bench.md) and pass --data-root <data-root> or set {DATA_ROOT_ENV}=<data-root>."
        + (f" {extra}" if extra else "")
    )
