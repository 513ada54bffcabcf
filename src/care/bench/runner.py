"""Evaluate any model on any task: dispatch by task type, time the phases, return a TaskResult."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from care.bench.options import RunOptions
from care.bench.report import results_table
from care.bench.rerank import run_rerank
from care.bench.result import TaskResult
from care.bench.retrieval import run_retrieval
from care.bench.sts import run_sts
from care.bench.task import TaskMetadata
from care.bench.timing import PhaseTimer
from care.data.io import atomic_write, require_folder_path
from care.encoders.base import Encoder, LexicalRetriever
from care.encoders.cache import temporary_cache
from care.errors import CareError

logger = logging.getLogger(__name__)

_RUNNERS = {"retrieval": run_retrieval, "rerank": run_rerank, "sts": run_sts}
RESULTS_TABLE_FILE = "results.md"


def evaluate(
    model: Encoder | LexicalRetriever, task: TaskMetadata, options: RunOptions | None = None, *, label: str | None = None,
) -> TaskResult:
    """Run one model on one task.

    Args:
        model: a dense :class:`Encoder` or a :class:`LexicalRetriever`.
        task: metadata whose ``path`` points at the task folder (see :func:`care.bench.registry.get_task`).
        options: cache, index, batch size; defaults to a temporary cache and an exact flat index.
        label: name recorded in the result instead of ``model.name`` (e.g. to tell two settings apart).
    """
    options = options or RunOptions()
    if task.path is None:
        raise CareError(f"task {task.name!r} has no data folder; resolve it with care.bench.registry.get_task")
    if not isinstance(model, (Encoder, LexicalRetriever)):
        raise CareError(f"{type(model).__name__} is neither an Encoder nor a LexicalRetriever")
    timer = PhaseTimer()
    with ExitStack() as stack:
        cache = options.cache or stack.enter_context(temporary_cache())
        logger.info("evaluating %s on %s (%s)", model.name, task.name, task.type)
        scores, stats, settings, refused = _RUNNERS[task.type](model, task, options, cache, timer)
    settings = {**settings, "instruction": task.instruction, "batch_size": options.batch_size,
                "cache": str(options.cache.root) if options.cache else None}
    if task.type == "retrieval":
        settings["relevance_threshold"] = task.relevance_threshold
    result = TaskResult(
        task=task.name, task_type=task.type, split=task.split, model=label or model.name, fingerprint=model.fingerprint,
        main_score=task.main_score, scores=scores, timings=timer.summary(), stats=stats, settings=settings,
        refused_queries=refused,
    )
    logger.info("%s on %s: %s = %.4f", result.model, task.name, task.main_score, result.main_value)
    return result


def check_output_dir(output_dir: str | Path) -> Path:
    """The results folder, created if missing.

    Raises:
        CareError: the path exists and is not a folder, or cannot be created.
    """
    folder = require_folder_path(output_dir, "--output", "give a folder for the result files (it is created if "
                                 f"missing), e.g. {Path(output_dir).with_suffix('')}_results/")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CareError(f"--output {folder}: cannot create the results folder ({exc.strerror})") from None
    return folder


def evaluate_many(
    models: Sequence[Encoder | LexicalRetriever],
    tasks: Sequence[TaskMetadata],
    options: RunOptions | None = None,
    output_dir: str | Path | None = None,
    labels: Sequence[str] | None = None,
) -> list[TaskResult]:
    """Run every model on every task; with ``output_dir`` write each result JSON and ``results.md``.

    ``results.md`` is rewritten after every finished (model, task), so when a later task fails (bad
    data, a crash) the table of the finished ones is there.

    ``labels`` (one per model) name the models in results; they must be distinct.
    """
    labels = list(labels) if labels is not None else [m.name for m in models]
    if len(labels) != len(models):
        raise CareError(f"{len(labels)} labels for {len(models)} models")
    if len(set(labels)) != len(labels):
        raise CareError(f"two models share a name ({labels}); give distinct labels so their result files do not collide")
    if output_dir is not None:
        check_output_dir(output_dir)
    results = []
    for model, label in zip(models, labels):
        for task in tasks:
            result = evaluate(model, task, options, label=label)
            results.append(result)
            if output_dir is not None:
                result.save(output_dir)
                with atomic_write(Path(output_dir) / RESULTS_TABLE_FILE) as fh:
                    fh.write(results_table(results))
    return results
