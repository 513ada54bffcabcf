"""Check every input of a run before the first step that costs time.

A bad line in a task's qrels or in the corpus to index must not surface after curation, labelling and
training: :func:`check_inputs` reads every input file with the reader its step will use
(:mod:`care.data.retrieval`, :mod:`care.data.training`, :mod:`care.data.rerank`, :mod:`care.data.sts`), so what passes here
parses there, and a problem is a :class:`~care.data.errors.DataFormatError` naming the config key, file, line
and field within seconds of ``care run`` starting (``inputs.train_file: /x/train.jsonl not found; ...``,
``inputs.tasks[1]: .../qrels/test.tsv, line 3, field 'corpus-id': unknown corpus id 'd99'``). It checks:

- ``inputs.raw_queries`` and every file of ``inputs.alignment_queries`` (queries files: ``id`` or ``_id``,
  non-empty ``text``, unique ids) and ``inputs.raw_documents`` (a corpus);
- ``inputs.train_file``: every row (``query``; ``pos`` or ``positive``, a text or a list);
- every task: a retrieval folder loads as evaluation loads it (corpus ids unique, texts non-empty, the
  configured split exists, every qrels row names a known query and document); a rerank or STS file parses;
- the corpus to index (``inputs.corpus``, else the main task's, already checked with its task);
- that ``curate.judges``, when set, is a file.

``care run --check`` runs these checks and prints the run's plan (:mod:`care.pipeline.plan`).

:func:`input_digests` gives the SHA-256 of each of those files (and of the judges config and the CARE stage
configs): the run's manifest keeps them, and a resumed run whose steps so far read an input that has changed
since is refused (:func:`care.pipeline.run.run_pipeline`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from care.bench.task import TaskMetadata
from care.data.errors import DataFormatError
from care.data.rerank import load_rerank
from care.data.retrieval import check_corpus, load_queries, load_retrieval_folder
from care.data.sts import load_sts
from care.data.training import iter_training_file
from care.errors import CareError
from care.pipeline.context import RunContext
from care.pipeline.sources import corpus_file, task_of, tasks

logger = logging.getLogger(__name__)


def _check_task(task: TaskMetadata) -> dict[str, int]:
    """Read one task's files as its evaluation will; returns their sizes."""
    from care.bench.registry import split_files_of

    if task.path is None:  # nothing local to read (fetched when evaluated)
        return {}
    if task.type == "retrieval":
        data = load_retrieval_folder(task.path, task.split)
        return {"documents": len(data.corpus), "queries": len(data.queries),
                "judgements": sum(map(len, data.qrels.values()))}
    path = split_files_of(task)[0]
    if task.type == "rerank":
        return {"examples": len(load_rerank(path))}
    return {"pairs": len(load_sts(path))}


def input_files(ctx: RunContext) -> list[Path]:
    """Every file outside the run folder whose content the run's steps read, each once, in a stable order:
    the inputs :func:`check_inputs` reads (a task's corpus, queries and qrels of its split), the judges config
    and the YAML files of a CARE stage-config folder. A task without local files (fetched when evaluated) adds none.
    """
    from care.bench.registry import split_files_of
    from care.train.recipes.presets import PRESET_PREFIX

    inputs, config = ctx.config.inputs, ctx.config
    named = [inputs.raw_queries, inputs.raw_documents, inputs.train_file, *inputs.alignment_queries, config.curate.judges]
    files = [Path(p) for p in named if p]
    for task in tasks(ctx).values():
        files += split_files_of(task)
        if task.type == "retrieval" and task.path is not None:
            files.append(Path(task.path) / "corpus.jsonl")
    try:
        files.append(corpus_file(ctx))
    except CareError:
        pass  # no corpus to index: check_inputs refuses the run when the index step needs one
    stage_configs = config.recipes.care.config_dir
    if stage_configs and not stage_configs.startswith(PRESET_PREFIX) and Path(stage_configs).is_dir():
        files += sorted(Path(stage_configs).glob("*.yaml"))
    seen: dict[Path, Path] = {}
    for path in files:
        if path.is_file():
            seen.setdefault(path.resolve(), path)
    return list(seen.values())


def input_digests(ctx: RunContext) -> dict[str, str]:
    """``{absolute path: SHA-256 of its content}`` of :func:`input_files`."""
    from care.hashes import file_sha256

    return {str(path.resolve()): file_sha256(path) for path in input_files(ctx)}


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


class InputFileError(DataFormatError):
    """A bad input file of the run config, named by its config key first (``inputs.train_file: /x/train.jsonl,
    line 2, field 'pos': empty list``).

    Attributes:
        key: the config key that names the file (``inputs.tasks[0]``); the rest as :class:`DataFormatError`.
    """

    def __init__(self, key: str, error: DataFormatError) -> None:
        super().__init__(error.path, error.problem, line=error.line, field=error.field, hint=error.hint)
        self.key = key
        self.args = (f"{key}: {error}",)


@contextlib.contextmanager
def _naming(key: str) -> Iterator[None]:
    """Errors reading the input of config key ``key`` name the key first."""
    try:
        yield
    except InputFileError:
        raise
    except DataFormatError as exc:
        raise InputFileError(key, exc) from exc
    except CareError as exc:
        if str(exc).startswith(f"{key}: "):
            raise
        raise CareError(f"{key}: {exc}") from exc


def _require_file(key: str, value: str) -> Path:
    """The file config key ``key`` names, when it is one.

    Raises:
        CareError: ``inputs.train_file: /x/train.jsonl not found; ...``: the key, the path and how to fix it.
    """
    path = Path(value)
    if path.is_dir():
        raise CareError(f"{key}: {path} is a folder; name a file (JSONL) there, or fix {key} in the run config")
    if not path.is_file():
        raise CareError(f"{key}: {path} not found; check the path (a relative path is read next to the run config, "
                        f"else from the current folder) or fix {key} in the run config")
    return path


def check_inputs(ctx: RunContext) -> dict[str, Any]:
    """Read every input of the run (module docstring); returns what was read, counted. Every error names the config
    key of the input first (``inputs.train_file: ...``, ``inputs.tasks[1]: ...``).

    Raises:
        InputFileError: a bad file (a :class:`DataFormatError`), naming the key, file, line and field.
        CareError: an input that cannot be found (a file, a task, a split, the corpus to index), naming the key.
    """
    started = time.perf_counter()
    config = ctx.config
    inputs = config.inputs
    summary: dict[str, Any] = {}
    if inputs.raw_queries:
        with _naming("inputs.raw_queries"):
            summary["raw_queries"] = len(load_queries(_require_file("inputs.raw_queries", inputs.raw_queries)))
    if inputs.raw_documents:
        with _naming("inputs.raw_documents"):
            summary["raw_documents"] = check_corpus(_require_file("inputs.raw_documents", inputs.raw_documents))
    if inputs.train_file:
        with _naming("inputs.train_file"):
            path = _require_file("inputs.train_file", inputs.train_file)
            summary["train_rows"] = sum(1 for _ in iter_training_file(path))
    if inputs.alignment_queries:
        summary["alignment_queries"] = 0
        for i, value in enumerate(inputs.alignment_queries):
            key = f"inputs.alignment_queries[{i}]"
            with _naming(key):
                summary["alignment_queries"] += len(load_queries(_require_file(key, value)))
    if config.curate.judges:
        _require_file("curate.judges", config.curate.judges)
    run_tasks = {}
    summary["tasks"] = {}
    for i, name in enumerate(inputs.tasks):
        with _naming(f"inputs.tasks[{i}]"):
            run_tasks[name] = task_of(ctx, name)
            summary["tasks"][name] = _check_task(run_tasks[name])
    key = "inputs.corpus" if inputs.corpus else "inputs.tasks[0]"  # the main task's corpus, when none is named
    with _naming(key):
        try:
            corpus = corpus_file(ctx)
        except CareError:
            if "index" in config.selected_steps:
                raise
            corpus = None
        if corpus is not None:
            checked = [Path(t.path) / "corpus.jsonl" for t in run_tasks.values() if t.type == "retrieval" and t.path]
            if not any(_same_file(corpus, c) for c in checked if c.is_file()):
                summary["corpus_documents"] = check_corpus(_require_file(key, str(corpus)))
    logger.info("inputs checked in %.1f s: %s", time.perf_counter() - started, summary)
    return summary
