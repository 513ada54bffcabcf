"""Check every input of a run before the first step that costs time.

A bad line in a task's qrels or in the corpus to index must not surface after curation, labelling and
training: :func:`check_inputs` reads every input file with the reader its step will use
(:mod:`care.data.retrieval`, :mod:`care.data.training`, :mod:`care.data.rerank`, :mod:`care.data.sts`), so what passes here
parses there, and a problem is a :class:`~care.data.errors.DataFormatError` naming the file, line and
field within seconds of ``care run`` starting. It checks:

- ``inputs.raw_queries`` and every file of ``inputs.alignment_queries`` (queries files: ``id`` or ``_id``,
  non-empty ``text``, unique ids) and ``inputs.raw_documents`` (a corpus);
- ``inputs.train_file``: every row (``query``; ``pos`` or ``positive``, a text or a list);
- every task: a retrieval folder loads as evaluation loads it (corpus ids unique, texts non-empty, the
  configured split exists, every qrels row names a known query and document); a rerank or STS file parses;
- the corpus to index (``inputs.corpus``, else the main task's, already checked with its task).

:func:`input_digests` gives the SHA-256 of each of those files (and of the judges config and the CARE stage
configs): the run's manifest keeps them, and a resumed run whose steps so far read an input that has changed
since is refused (:func:`care.pipeline.run.run_pipeline`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from care.bench.task import TaskMetadata
from care.data.rerank import load_rerank
from care.data.sts import load_sts
from care.data.retrieval import check_corpus, load_queries, load_retrieval_folder
from care.data.training import iter_training_file
from care.errors import CareError
from care.pipeline.context import RunContext
from care.pipeline.sources import corpus_file, tasks

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
    from care.train.presets import PRESET_PREFIX

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
    from care.encoders.fingerprint import file_sha256

    return {str(path.resolve()): file_sha256(path) for path in input_files(ctx)}


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def check_inputs(ctx: RunContext) -> dict[str, Any]:
    """Read every input of the run (module docstring); returns what was read, counted.

    Raises:
        DataFormatError: a bad file, naming the file, line and field.
        CareError: an input that cannot be found (a task, a split, the corpus to index).
    """
    started = time.perf_counter()
    inputs = ctx.config.inputs
    summary: dict[str, Any] = {}
    if inputs.raw_queries:
        summary["raw_queries"] = len(load_queries(inputs.raw_queries))
    if inputs.raw_documents:
        summary["raw_documents"] = check_corpus(inputs.raw_documents)
    if inputs.train_file:
        summary["train_rows"] = sum(1 for _ in iter_training_file(inputs.train_file))
    if inputs.alignment_queries:
        summary["alignment_queries"] = sum(len(load_queries(path)) for path in inputs.alignment_queries)
    run_tasks = tasks(ctx)
    summary["tasks"] = {name: _check_task(task) for name, task in run_tasks.items()}
    try:
        corpus = corpus_file(ctx)
    except CareError:
        if "index" in ctx.config.selected_steps:
            raise
        corpus = None
    if corpus is not None:
        checked = [Path(t.path) / "corpus.jsonl" for t in run_tasks.values() if t.type == "retrieval" and t.path]
        if not any(_same_file(corpus, c) for c in checked if c.is_file()):
            summary["corpus_documents"] = check_corpus(corpus)
    logger.info("inputs checked in %.1f s: %s", time.perf_counter() - started, summary)
    return summary
