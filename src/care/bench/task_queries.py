"""The query-side texts of a task (for timing a model's query encoder on the task's own inputs)."""

from __future__ import annotations

from care.bench.task import TaskMetadata
from care.errors import CareError


def task_queries(task: TaskMetadata, limit: int) -> list[str]:
    """Up to ``limit`` query texts: retrieval queries, rerank queries, or the first sentence of STS pairs."""
    if task.type == "retrieval":
        from care.bench.retrieval import load_data

        texts = list(load_data(task).queries.values())
    elif task.type == "rerank":
        from care.bench.rerank import rerank_file
        from care.data.rerank import load_rerank

        texts = [example.query for example in load_rerank(rerank_file(task))]
    elif task.type == "sts":
        from care.bench.sts import sts_file
        from care.data.sts import load_sts

        texts = [pair.sentence1 for pair in load_sts(sts_file(task))]
    else:
        raise CareError(f"task {task.name!r} of type {task.type!r} has no query texts to time")
    return list(dict.fromkeys(texts))[:limit]
