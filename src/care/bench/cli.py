"""``care bench``: evaluate models on tasks and print / save a results table.

With no ``--task`` it runs on the default tasks given to :func:`register` (the ``care`` command
passes the embedded demo benchmark, :func:`care.demo.demo_task_folders`); with no ``--model``, on the
reference models (``bm25`` and ``e5``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from care.bench.task import TaskMetadata

logger = logging.getLogger(__name__)

#: Models run when ``care bench`` is called without ``--model``.
REFERENCE_MODELS: tuple[str, ...] = ("bm25", "e5")
#: Queries of the first task timed by ``--latency`` (passes over them until the medians are stable).
LATENCY_QUERIES = 50
LATENCY_FILE = "latency.json"


#: Where the task folders run without ``--task`` come from (set by :func:`register`).
_DEFAULT_TASKS: list[Callable[[], list[Path]]] = []


def _default_task_folders() -> list[Path]:
    if not _DEFAULT_TASKS:
        from care.errors import CareError

        raise CareError("no default tasks: name one with --task NAME_OR_FOLDER")
    return _DEFAULT_TASKS[-1]()


def bench(
    ctx: typer.Context,
    model: list[str] | None = typer.Option(None, "--model", "-m", help="Model spec (bm25, e5, a model folder, ...); repeatable. Default: bm25 and e5."),
    task: list[str] | None = typer.Option(None, "--task", "-t", help="Registered task name or task folder; repeatable. Default: the embedded demo benchmark."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Folder for <model>__<task>.json results and results.md."),
    batch_size: int = typer.Option(32, "--batch-size", help="Encoder batch size."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Embedding cache folder (default $CARE_CACHE_DIR or ~/.cache/care/embeddings)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the embedding cache."),
    cache_dtype: str = typer.Option("float32", "--cache-dtype", help="Cached embedding type: float32 or float16."),
    index: str = typer.Option("flat", "--index", help="FAISS index for retrieval: flat (exact), hnsw, ivf, ivfpq."),
    nlist: int | None = typer.Option(None, "--nlist", help="IVF lists (ivf / ivfpq)."),
    nprobe: int | None = typer.Option(None, "--nprobe", help="IVF lists probed per query."),
    ef_search: int | None = typer.Option(None, "--ef-search", help="HNSW search beam width."),
    top_k: int = typer.Option(100, "--top-k", help="Documents retrieved per query."),
    data_root: Path | None = typer.Option(None, "--data-root", help="Folder with one subfolder per registered task (or $CMEDTEB_DATA)."),
    split: str | None = typer.Option(None, "--split", help="Data split to evaluate (e.g. test -> test_qrels.tsv or BEIR's qrels/test.tsv, test_queries.jsonl when present); refused when a task has no file for it."),
    device: str | None = typer.Option(None, "--device", help="Device for neural models (cpu, cuda, cuda:1, ...)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Hide progress bars."),
    latency: bool = typer.Option(False, "--latency", help="Also time single queries side by side on the first retrieval task's queries: the dense models' query encoding and BM25's search of that task's corpus "
                                 "(random order per query, stable median with p10/p90, self-check of a second copy of the "
                                 "first model, overhead-dominated models flagged); printed and written to OUTPUT/latency.json."),
) -> None:
    """Evaluate encoders on CMedTEB / custom tasks; writes one JSON per (model, task) and results.md."""
    if ctx.invoked_subcommand is not None:  # care bench report ...
        return
    from dataclasses import replace

    from care.bench.options import RunOptions
    from care.bench.registry import get_task, infer_task, split_files_of
    from care.bench.report import results_table
    from care.bench.runner import check_output_dir, evaluate_many
    from care.encoders.cache import EmbeddingCache, default_cache_dir
    from care.index.config import IndexConfig

    if output is not None:
        check_output_dir(output)
    index_kwargs = {k: v for k, v in {"nlist": nlist, "nprobe": nprobe, "ef_search": ef_search}.items() if v is not None}
    index_config = IndexConfig(type=index, **index_kwargs)
    specs = list(model) if model else list(REFERENCE_MODELS)
    if task:
        tasks = [get_task(t, data_root=data_root) for t in task]
    else:
        tasks = [infer_task(folder) for folder in _default_task_folders()]
    if split is not None:
        tasks = [replace(t, split=split) for t in tasks]
    for t in tasks:  # a split a folder does not have is refused here, before any model loads
        split_files_of(t)
    cache = None if no_cache else EmbeddingCache(cache_dir or default_cache_dir(), dtype=cache_dtype)
    options = RunOptions(cache=cache, index=index_config, batch_size=batch_size, top_k=top_k, show_progress=not no_progress)
    models = [_load(spec, device, batch_size) for spec in specs]
    names = [m.name for m in models]
    # two specs that load models of the same name (e.g. bm25 and bm25?stopwords=none) are told apart by their spec
    labels = [spec if names.count(name) > 1 else name for spec, name in zip(specs, names)]
    results = evaluate_many(models, tasks, options, output_dir=output, labels=labels)
    typer.echo(results_table(results))
    if latency:
        typer.echo(_latency(specs, labels, models, tasks, device, batch_size, output))
    if output is not None:
        logger.info("results written to %s", output)


def _latency(specs: list[str], labels: list[str], models: list, tasks: list, device: str | None, batch_size: int,
             output: Path | None) -> str:
    """Time single queries side by side on the queries of the first retrieval task (else of the first task): the
    dense models' query encoders and, where that task is a retrieval task, each lexical model's search of its corpus
    (indexed here); a second copy of the first timed model is the self-check."""
    from care.bench.latency import latency_table, measure_latency
    from care.bench.task_queries import task_queries
    from care.data.io import write_json
    from care.encoders.base import Encoder, LexicalRetriever

    timing_task = next((t for t in tasks if t.type == "retrieval"), tasks[0])
    corpus = _corpus_of(timing_task) if timing_task.type == "retrieval" else None
    timed = {label: (spec, m) for spec, label, m in zip(specs, labels, models)
             if isinstance(m, Encoder) or corpus is not None}
    untimed = [label for label in labels if label not in timed]
    note = (f"not timed: {', '.join(untimed)} (a lexical model's time is a search of a corpus, and no task here is "
            "a retrieval task)\n") if untimed else ""
    if not timed:
        return note

    def ready(model: Encoder | LexicalRetriever) -> Encoder | LexicalRetriever:  # a lexical one searches the corpus
        if not isinstance(model, Encoder):
            model.index(*corpus)
        return model

    first, (spec, _) = next(iter(timed.items()))
    report = measure_latency({label: ready(m) for label, (_, m) in timed.items()}, task_queries(timing_task, LATENCY_QUERIES),
                             instruction=timing_task.instruction, control=(first, ready(_load(spec, device, batch_size))))
    if output is not None:
        write_json(Path(output) / LATENCY_FILE, report.to_dict())
    return f"query latency on {timing_task.name}'s queries:\n" + latency_table(report) + note


def _corpus_of(task: TaskMetadata) -> tuple[list[str], list[str]]:
    """``(doc_ids, texts)`` of a retrieval task's corpus, as its evaluation indexes them."""
    from care.bench.retrieval import load_data

    corpus = load_data(task).corpus
    return list(corpus), [doc.full_text for doc in corpus.values()]


def _load(spec: str, device: str | None, batch_size: int):  # noqa: ANN202 — Encoder | LexicalRetriever
    from care.encoders.registry import load_model

    return load_model(spec, device=device, batch_size=batch_size)


def register(app: typer.Typer, *, default_tasks: Callable[[], list[Path]] | None = None) -> None:
    """Add ``care bench`` to the top-level app; ``default_tasks`` gives the task folders run without ``--task``."""
    if default_tasks is not None:
        _DEFAULT_TASKS.append(default_tasks)
    from care.bench.reports.cli import register as register_report
    from care.bench.service_load.cli import register as register_service_load

    bench_app = typer.Typer(help="Evaluate encoders on tasks (care bench --model ... --task ...); regenerate the result tables (care bench report).")
    bench_app.callback(invoke_without_command=True)(bench)
    register_report(bench_app)
    register_service_load(bench_app)
    app.add_typer(bench_app, name="bench")
