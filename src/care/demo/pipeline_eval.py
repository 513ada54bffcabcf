"""Demo steps 4-5: evaluate every model on the demo tasks, time their query sides, build the CARE index.

``evaluate``: BM25, e5 zero-shot, the symmetric small and large models, CARE after Stage I and after
Stage II, and the e5 student (its queries, e5's documents) on each demo task with the harness
(:func:`care.bench.runner.evaluate`); one ``TaskResult`` JSON per (model, task) under ``eval/results``,
read back on a rerun (a killed evaluation resumes at the next unfinished pair).

``latency``: single-query encoding time of every dense model's query side with the project's latency
routine (:func:`care.bench.latency.measure_latency`: model order randomised per query, stable medians
with p10 / p90, a self-check of two copies of CARE's query tower, overhead-dominated towers flagged).

``index``: ``care index build`` over the demo corpus with the CARE document tower (flat FAISS by
default), ready for ``care serve``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import quote
from typing import Any

from care.bench.latency import LatencySettings, measure_latency
from care.bench.result import TaskResult, safe_name
from care.data.io import iter_jsonl, write_json
from care.demo import demo_tasks_root
from care.demo.pipeline_context import DemoContext
from care.demo.tasks import RETRIEVAL_TASK
from care.demo.pipeline_train import STUDENT_QUERY_PREFIX
from care.errors import CareError

logger = logging.getLogger(__name__)

BM25, E5, SYM_SMALL, SYM_LARGE, CARE_STAGE1, CARE, STUDENT = (
    "BM25", "e5 (zero-shot)", "symmetric small", "symmetric large", "CARE w/o Stage II", "CARE", "e5 student")
RESULTS_FOLDER = "results"
LATENCY_FILE = "latency.json"
#: The latency measurement runs at least ``latency_rounds`` passes over the queries and at most this
#: many times as many (fewer once every median is stable), within LATENCY_SECONDS.
MAX_LATENCY_PASS_FACTOR = 10
LATENCY_SECONDS = 60.0
INDEX_FOLDER = "index"


def model_folders(ctx: DemoContext) -> dict[str, Path]:
    """Label -> trained model folder (query-side folder for the e5 student)."""
    recipe, student = ctx.recipe_dir, ctx.student_dir
    folders = {SYM_SMALL: recipe / "init_query" / "query", SYM_LARGE: recipe / "init_document" / "document",
               CARE_STAGE1: recipe / "stage1" / "model", CARE: recipe / "stage2" / "model"}
    if not ctx.config.skip_e5:
        folders[STUDENT] = student / "e5_stage1_sft" / "query"
    return folders


def model_labels(ctx: DemoContext) -> list[str]:
    """Every evaluated model, in table order."""
    return [BM25, *([] if ctx.config.skip_e5 else [E5]), *model_folders(ctx)]


def _load(ctx: DemoContext, label: str, *, for_latency: bool = False):
    """The model behind ``label``. For latency, e5 is the raw encoder (the memo would answer instantly)
    and the e5 student is its query tower alone."""
    from care.encoders.asymmetric import AsymmetricEncoder
    from care.encoders.registry import load_model

    if label == BM25:
        return load_model("bm25")
    if label == E5:
        return ctx.e5.encoder if for_latency else ctx.e5
    folder = model_folders(ctx)[label]
    step = "train_student" if label == STUDENT else "train_care"
    spec = str(ctx.require(folder, step))
    if label == STUDENT:  # e5's convention: its own query prefix, no task instruction
        spec += f"?query_prefix={quote(STUDENT_QUERY_PREFIX)}&instructions=false"
    query = load_model(spec)
    if label == STUDENT and not for_latency:
        return AsymmetricEncoder(query, ctx.e5, name=label)
    return query


def _result_path(ctx: DemoContext, label: str, task: str) -> Path:
    return ctx.dir("eval", RESULTS_FOLDER) / f"{safe_name(label)}__{safe_name(task)}.json"


def load_results(ctx: DemoContext) -> list[TaskResult]:
    """The evaluation results found in the run folder, in table order."""
    found = []
    for label in model_labels(ctx):
        for task in ctx.config.tasks:
            path = _result_path(ctx, label, task)
            if path.is_file():
                found.append(TaskResult.load(path))
    return found


def step_evaluate(ctx: DemoContext) -> dict[str, Any]:
    """Every model on every configured demo task; returns ``{model: {task: main score}}``."""
    from care.bench.options import RunOptions
    from care.bench.registry import infer_task
    from care.bench.runner import evaluate
    from care.encoders.cache import EmbeddingCache

    cfg = ctx.config
    options = RunOptions(cache=EmbeddingCache(ctx.dir("eval", "embedding_cache")), show_progress=cfg.show_progress)
    tasks = {name: infer_task(demo_tasks_root() / name) for name in cfg.tasks}
    scores: dict[str, dict[str, float]] = {}
    for label in model_labels(ctx):
        todo = [t for t in cfg.tasks if not _result_path(ctx, label, t).is_file()]
        model = _load(ctx, label) if todo else None
        scores[label] = {}
        for name, task in tasks.items():
            path = _result_path(ctx, label, name)
            if path.is_file():
                result = TaskResult.load(path)
            else:
                result = evaluate(model, task, options, label=label)
                write_json(path, result.to_dict())
                ctx.save_memo()
            scores[label][name] = round(result.main_value, 4)
            logger.info("evaluate: %s on %s: %s = %.4f", label, name, result.main_score, result.main_value)
    return {"scores": scores}


def demo_queries(limit: int) -> list[str]:
    """The first ``limit`` questions of the demo retrieval task."""
    rows = [row["text"] for _, row in iter_jsonl(demo_tasks_root() / RETRIEVAL_TASK / "queries.jsonl")]
    return rows[:limit]


def step_latency(ctx: DemoContext) -> dict[str, Any]:
    """Single-query latency of every dense model's query side (a ``LatencyReport`` dict in ``eval/latency.json``)."""
    from care.models.instructions import RETRIEVAL_INSTRUCTION

    cfg = ctx.config
    models = {label: _load(ctx, label, for_latency=True) for label in model_labels(ctx) if label != BM25}
    queries = demo_queries(cfg.latency_queries)
    calls = cfg.latency_queries * cfg.latency_rounds
    settings = LatencySettings(min_calls=calls, max_calls=calls * MAX_LATENCY_PASS_FACTOR, max_seconds=LATENCY_SECONDS)
    control = CARE if CARE in models else next(iter(models))
    report = measure_latency(models, queries, instruction=RETRIEVAL_INSTRUCTION, settings=settings,
                             control=(control, _load(ctx, control, for_latency=True)))
    write_json(ctx.dir("eval") / LATENCY_FILE, report.to_dict())
    logger.info("latency (p50 ms, batch 1): %s; %s", {k: round(v, 3) for k, v in report.medians().items()},
                report.self_check.describe())
    return {"median_ms": report.medians(), "self_check_passed": report.trusted}


def step_index(ctx: DemoContext) -> dict[str, Any]:
    """Encode the demo corpus with CARE's document tower and build the index (resumable)."""
    from care.index.build import BuildOptions, build
    from care.index.config import IndexConfig

    model = ctx.require(model_folders(ctx)[CARE], "train_care").resolve()
    options = BuildOptions(model=str(model), corpus=demo_tasks_root() / RETRIEVAL_TASK / "corpus.jsonl",
                           output=ctx.root / INDEX_FOLDER, index=IndexConfig.from_dict({"type": ctx.config.index_type}))
    manifest = build(options)
    if manifest is None:
        raise CareError(f"index build in {options.output} did not merge; rerun care demo to finish it")
    return {"index": str(options.output), "model": str(model), "documents": manifest.n_docs, "dim": manifest.dim,
            "type": manifest.index.get("type")}
