"""One (model, task) evaluation result, saved as JSON."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from care.data.io import write_json

RESULT_FORMAT_VERSION = 1


@dataclass
class TaskResult:
    """Scores and timings of one model on one task.

    Attributes:
        task / task_type / split: which task was run.
        model / fingerprint: the model's name and its weights+settings fingerprint.
        main_score: the name of the headline metric; ``scores[main_score]`` is its value.
        scores: every metric (names as in :data:`care.bench.task.TASK_SCORES`).
        timings: seconds — ``load_s``, ``encode_queries_s``, ``encode_documents_s``, ``index_s``,
            ``search_s``, ``metrics_s``, ``total_s`` — and ``outside_encoding_share``
            (``1 - (encode_queries_s + encode_documents_s) / total_s``).
        stats: task size (``n_queries``, ``n_documents``, ``n_pairs``...).
        settings: how it was run (index type, cache, batch size, instruction...).
        refused_queries: ``{query id: reason}`` of the queries refused before encoding and left out
            of the metric (:mod:`care.bench.query_check`).
    """

    task: str
    task_type: str
    split: str | None
    model: str
    fingerprint: str
    main_score: str
    scores: dict[str, float]
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    refused_queries: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    format_version: int = RESULT_FORMAT_VERSION

    @property
    def main_value(self) -> float:
        return self.scores[self.main_score]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        return cls(**data)

    def file_name(self) -> str:
        return f"{safe_name(self.model)}__{safe_name(self.task)}.json"

    def save(self, folder: str | Path) -> Path:
        """Atomically write ``<folder>/<model>__<task>.json``; returns the path."""
        path = Path(folder) / self.file_name()
        write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, path: str | Path) -> TaskResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def safe_name(name: str) -> str:
    """A file-name-safe version of a model or task name (path separators and odd characters -> ``_``)."""
    cleaned = re.sub(r"[^\w.\-]+", "_", name, flags=re.UNICODE).strip("._")
    return cleaned or "unnamed"
