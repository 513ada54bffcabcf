"""The CMedTEB benchmark harness: declarative tasks, a registry, runners for retrieval / rerank /
STS, metrics from pytrec_eval and scipy, JSON results and Markdown tables, mteb interop."""

from care.bench.options import RunOptions
from care.bench.registry import get_task, list_tasks, register_task
from care.bench.result import TaskResult
from care.bench.runner import evaluate, evaluate_many
from care.bench.task import TaskMetadata

__all__ = ["RunOptions", "TaskMetadata", "TaskResult", "evaluate", "evaluate_many", "get_task", "list_tasks", "register_task"]
