"""Declarative, validated task metadata (the MTEB idea): what a task is, where its data lives,
how it is scored. Round-trips to the ``task.json`` file a task folder may carry."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.errors import CareError

TASK_TYPES: tuple[str, ...] = ("retrieval", "rerank", "sts")

#: Scores each task type reports; the first is the default main score.
TASK_SCORES: dict[str, tuple[str, ...]] = {
    "retrieval": ("ndcg_at_10", "recall_at_10", "recall_at_100", "mrr_at_10"),
    "rerank": ("map_at_10", "mrr_at_10", "map_at_1000"),
    "sts": ("pearson", "spearman"),
}
STS_ROLES: tuple[str, ...] = ("query", "document")
TASK_FILE = "task.json"
#: The data files that make a folder a task of each type (see :func:`care.bench.registry.infer_task`).
RETRIEVAL_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv")
RERANK_FILE = "rerank.jsonl"
STS_FILE = "sts.jsonl"


def default_main_score(task_type: str) -> str:
    return TASK_SCORES[task_type][0]


@dataclass(frozen=True)
class TaskMetadata:
    """One benchmark task.

    Attributes:
        name: unique task name (used in result files and the registry).
        type: ``retrieval`` / ``rerank`` / ``sts``.
        path: the task folder (``None`` for registered tasks whose data root is given at run time).
        split: data split (``test`` reads ``test_queries.jsonl`` / ``test_qrels.tsv`` when present);
            ``None`` for the folder's default files.
        main_score: the headline metric, one of :data:`TASK_SCORES` for the type.
        instruction: task instruction applied to queries (and to STS sentences); ``None`` for none.
        relevance_threshold: qrels grade from which a document counts as relevant for binary metrics.
        description, language: free text / BCP-47-ish language code.
        sts_role: role in which STS sentences are encoded (``query`` as in the paper, or ``document``).
        extra_scores: additional metric names this task reports (e.g. ``map_at_1000`` for C-MTEB rerank).
    """

    name: str
    type: str
    path: Path | None = None
    split: str | None = None
    main_score: str = ""
    instruction: str | None = None
    relevance_threshold: int = 1
    description: str = ""
    language: str = "zh"
    sts_role: str = "query"
    extra_scores: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise CareError("task name must be a non-empty string")
        if self.type not in TASK_TYPES:
            raise CareError(f"task {self.name!r}: type must be one of {', '.join(TASK_TYPES)}, got {self.type!r}")
        if not self.main_score:
            object.__setattr__(self, "main_score", default_main_score(self.type))
        valid = TASK_SCORES[self.type]
        if self.main_score not in valid:
            raise CareError(f"task {self.name!r}: main_score {self.main_score!r} is not a {self.type} score; choose one of {', '.join(valid)}")
        for extra in self.extra_scores:
            if extra not in valid:
                raise CareError(f"task {self.name!r}: extra score {extra!r} is not a {self.type} score")
        if isinstance(self.relevance_threshold, bool) or not isinstance(self.relevance_threshold, int) or self.relevance_threshold < 1:
            raise CareError(f"task {self.name!r}: relevance_threshold must be an integer >= 1, got {self.relevance_threshold!r}")
        if self.sts_role not in STS_ROLES:
            raise CareError(f"task {self.name!r}: sts_role must be one of {STS_ROLES}, got {self.sts_role!r}")
        if self.instruction is not None and not isinstance(self.instruction, str):
            raise CareError(f"task {self.name!r}: instruction must be a string or null")
        if self.path is not None and not isinstance(self.path, Path):
            object.__setattr__(self, "path", Path(self.path))
        object.__setattr__(self, "extra_scores", tuple(self.extra_scores))
        object.__setattr__(self, "instruction", self.instruction or None)

    @property
    def scores(self) -> tuple[str, ...]:
        """Every metric this task reports: the type's standard set plus ``extra_scores``."""
        base = [s for s in TASK_SCORES[self.type] if s != "map_at_1000"]
        return tuple(dict.fromkeys([*base, *self.extra_scores]))

    def with_path(self, path: str | Path) -> TaskMetadata:
        return replace(self, path=Path(path))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path) if self.path is not None else None
        data["extra_scores"] = list(self.extra_scores)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: Path | None = None) -> TaskMetadata:
        """Build from a dict (e.g. a parsed ``task.json``); unknown keys and bad values are rejected."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        where = source if source is not None else Path("<task metadata>")
        if unknown:
            raise DataFormatError(where, f"unknown key(s) {unknown}", hint=f"known keys: {', '.join(sorted(known))}")
        for key in ("name", "type"):
            if key not in data:
                raise DataFormatError(where, "missing field", field=key)
        kwargs = dict(data)
        if kwargs.get("main_score") is None:
            kwargs.pop("main_score", None)
        if kwargs.get("extra_scores") is not None:
            kwargs["extra_scores"] = tuple(kwargs["extra_scores"])
        try:
            return cls(**kwargs)
        except CareError as exc:
            raise DataFormatError(where, str(exc)) from None
        except TypeError as exc:
            raise DataFormatError(where, f"invalid task metadata ({exc})") from None

    @classmethod
    def from_json(cls, text: str) -> TaskMetadata:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_task_file(cls, path: str | Path) -> TaskMetadata:
        """Read ``task.json``; the task's ``path`` becomes the folder holding it unless given."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise DataFormatError(path, "not valid UTF-8", hint="save task.json as UTF-8") from None
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"malformed JSON ({exc.msg})", line=exc.lineno) from None
        if not isinstance(data, dict):
            raise DataFormatError(path, "expected a JSON object")
        folder = path.parent
        given = data.get("path")
        data["path"] = (folder / given) if given else folder
        return cls.from_dict(data, source=path)
