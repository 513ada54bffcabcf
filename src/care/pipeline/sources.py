"""The run's evaluation tasks and corpus, resolved from ``inputs`` (names or folders, split, data root)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from care.bench.task import TaskMetadata
from care.data.rerank import load_rerank
from care.data.retrieval import load_queries
from care.errors import CareError
from care.pipeline.context import RunContext


def tasks(ctx: RunContext) -> dict[str, TaskMetadata]:
    """``{task name as configured: task}`` of every evaluation task (the configured split applied)."""
    return {name: task_of(ctx, name) for name in ctx.config.inputs.tasks}


def task_of(ctx: RunContext, name: str) -> TaskMetadata:
    """The evaluation task ``name`` (a registered name or a folder) with the run's data root, split and instruction.

    Raises:
        CareError: an unknown task, or a registered one whose data is not found.
    """
    from care.bench.registry import get_task

    inputs = ctx.config.inputs
    task = get_task(name, data_root=inputs.data_root)
    if inputs.split is not None:
        task = replace(task, split=inputs.split)
    if task.instruction is None and inputs.instruction is not None:
        task = replace(task, instruction=inputs.instruction)
    return task


#: The name of the validation split's task in the run's results (carved by the label step).
VALIDATION_TASK = "validation"


def evaluated_tasks(ctx: RunContext) -> dict[str, TaskMetadata]:
    """:func:`tasks`, then the validation split's task (``validation``) when the label step carved one: the
    held-out training queries against the run's corpus, with the main task's instruction."""
    from care.bench.registry import infer_task

    out = tasks(ctx)
    folder = ctx.validation_task
    if folder is not None:
        instruction = out[ctx.config.main_task].instruction
        out[VALIDATION_TASK] = replace(infer_task(folder), name=VALIDATION_TASK, instruction=instruction)
    return out


def main_task(ctx: RunContext) -> TaskMetadata:
    return tasks(ctx)[ctx.config.main_task]


def corpus_file(ctx: RunContext) -> Path:
    """The corpus to index: ``inputs.corpus``, else the main task's ``corpus.jsonl``."""
    if ctx.config.inputs.corpus:
        return Path(ctx.config.inputs.corpus)
    task = main_task(ctx)
    if task.path is None or not (Path(task.path) / "corpus.jsonl").is_file():
        raise CareError(f"the main task {task.name!r} has no corpus.jsonl; set inputs.corpus to the corpus to index")
    return Path(task.path) / "corpus.jsonl"


def main_queries(ctx: RunContext, limit: int) -> list[str]:
    """The first ``limit`` questions of the main task (its split's queries, or a rerank task's queries)."""
    from care.bench.registry import split_files_of

    task = main_task(ctx)
    if task.path is None:
        raise CareError(f"task {task.name!r} has no data folder")
    if task.type == "retrieval":
        return list(load_queries(split_files_of(task)[0]).values())[:limit]
    if task.type == "rerank":
        return [example.query for example in load_rerank(split_files_of(task)[0])][:limit]
    raise CareError(f"{task.path}: a {task.type} task has no queries to time; make a retrieval or rerank task "
                    "the main task (the first of inputs.tasks)")
