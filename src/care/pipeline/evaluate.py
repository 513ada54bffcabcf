"""Steps 4-6 of a run: evaluate every model on every task, time their query sides, build the index.

``evaluate``: the reference models (``models.references``) and every trained model on each task (and on the
validation split, as the task ``validation``) with
the harness (:func:`care.bench.runner.evaluate`); one ``TaskResult`` JSON per (model, task) under
``eval/results``, read back on a rerun (a killed evaluation resumes at the next unfinished pair).
Rows named in ``evaluate.onnx`` are also exported with ``care export-onnx`` and evaluated as
``<row>, ONNX fp32`` / ``<row>, ONNX int8`` (their document side unchanged).

``latency`` (:mod:`care.pipeline.latency`): every dense model's query side timed in one engine, with its speed-up
over symmetric large's; its record is :data:`LATENCY_FILE`.

``index``: ``care index build`` over the corpus with the best trained model on the validation split the label
step held out, else on the main task (or ``index.model``), warning when it scores below a dense reference or
the symmetric small model there; for a student, documents through its teacher and queries through the student.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from care.bench.result import TaskResult, safe_name
from care.data.io import write_json
from care.encoders.base import Encoder
from care.errors import CareError
from care.pipeline.context import EMBEDDINGS_CACHE, RunContext
from care.pipeline.sources import VALIDATION_TASK, corpus_file, evaluated_tasks, tasks

logger = logging.getLogger(__name__)

RESULTS_FOLDER = "results"
#: The latency step's record under ``eval/`` (:mod:`care.pipeline.latency`).
LATENCY_FILE = "latency.json"
INDEX_FOLDER = "index"
ONNX_FOLDER = "onnx"
ONNX_ROWS = (("ONNX fp32", False), ("ONNX int8", True))


def onnx_rows(ctx: RunContext) -> dict[str, tuple[str, bool]]:
    """``{row label: (source row, int8)}`` of the ONNX rows ``evaluate.onnx`` asks for."""
    return {f"{row}, {suffix}": (row, int8) for row in ctx.config.evaluate.onnx for suffix, int8 in ONNX_ROWS}


def model_labels(ctx: RunContext) -> list[str]:
    """Every evaluated model, in table order (references, trained models, their ONNX rows)."""
    labels = list(ctx.all_models())
    return [*labels, *(label for label, (row, _) in onnx_rows(ctx).items() if row in labels)]


def _export_dir(ctx: RunContext, row: str) -> Path:
    return ctx.root / "eval" / ONNX_FOLDER / safe_name(row)


def _export(ctx: RunContext, row: str, spec: str) -> Path:
    """The ONNX export of ``row``'s query side (made once)."""
    from care.encoders.onnx import CONFIG_FILE
    from care.models.onnx_export import export_query_encoder

    folder = _export_dir(ctx, row)
    if not (folder / CONFIG_FILE).is_file():
        export_query_encoder(spec, folder, quantize=True)
    return folder


def _shared(ctx: RunContext, spec: object) -> Encoder | None:
    """The run's shared encoder (behind its memo) when ``spec`` is the curation encoder or the teacher."""
    if isinstance(spec, str) and spec in (ctx.config.curate.encoder, ctx.config.models.teacher):
        return ctx.shared_encoder(spec)
    return None


def _pair_with_memo(ctx: RunContext, label: str, spec: str) -> Encoder | None:
    """A trained pair folder (a student) whose document side is the run's teacher, paired with the teacher's
    memo so its documents are not encoded again; ``None`` for anything else."""
    from care.encoders.pair import AsymmetricEncoder
    from care.encoders.registry import read_spec_file, spec_file_in_folder
    from care.encoders.sides import load_side

    spec_file = spec_file_in_folder(spec)
    memo = _shared(ctx, read_spec_file(spec_file).get("document")) if spec_file is not None else None
    return None if memo is None else AsymmetricEncoder(load_side(spec, "query"), memo, name=label)


def load_row(ctx: RunContext, label: str, *, for_latency: bool = False) -> Any:
    """The model behind a table row. For latency only the query side (a memo would answer instantly)."""
    from care.encoders.pair import AsymmetricEncoder
    from care.encoders.registry import load_model
    from care.encoders.sides import load_side

    models = ctx.all_models()
    onnx = onnx_rows(ctx)
    if label in onnx:
        from care.encoders.onnx import OnnxQueryEncoder

        row, int8 = onnx[label]
        query = OnnxQueryEncoder(_export(ctx, row, models[row]), int8=int8, threads=ctx.config.threads)
        return query if for_latency else AsymmetricEncoder(query, load_side(models[row], "document"), name=label)
    spec = models[label]
    if label in ctx.config.models.references:
        shared = _shared(ctx, spec)
        if shared is not None:  # the run's e5: evaluated through its memo, timed raw
            return getattr(shared, "encoder", shared) if for_latency else shared
        return load_model(spec)
    if for_latency:
        return load_side(spec, "query")
    return _pair_with_memo(ctx, label, spec) or load_model(spec)


def _result_path(ctx: RunContext, label: str, task: str) -> Path:
    return ctx.dir("eval", RESULTS_FOLDER) / f"{safe_name(label)}__{safe_name(task)}.json"


def load_results(ctx: RunContext) -> list[TaskResult]:
    """The evaluation results found in the run folder, in table order."""
    found = []
    for label in model_labels(ctx):
        for name in evaluated_tasks(ctx):
            path = _result_path(ctx, label, name)
            if path.is_file():
                found.append(TaskResult.load(path))
    return found


def step_evaluate(ctx: RunContext) -> dict[str, Any]:
    """Every model on every task; returns ``{model: {task: main score}}``."""
    from care.bench.options import RunOptions
    from care.bench.runner import evaluate
    from care.encoders.cache import EmbeddingCache

    options = RunOptions(cache=EmbeddingCache(ctx.cache_dir(EMBEDDINGS_CACHE)), show_progress=ctx.config.show_progress)
    run_tasks = evaluated_tasks(ctx)
    scores: dict[str, dict[str, float]] = {}
    for label in model_labels(ctx):
        todo = [name for name in run_tasks if not _result_path(ctx, label, name).is_file()]
        model = load_row(ctx, label) if todo else None
        scores[label] = {}
        for name, task in run_tasks.items():
            path = _result_path(ctx, label, name)
            if path.is_file():
                result = TaskResult.load(path)
            else:
                result = evaluate(model, task, options, label=label)
                write_json(path, result.to_dict())
                ctx.save_memo()
            scores[label][task.name] = round(result.main_value, 4)
            logger.info("evaluate: %s on %s: %s = %.4f", label, task.name, result.main_score, result.main_value)
    return {"scores": scores}


def selection_task(ctx: RunContext) -> str:
    """The task models are chosen on: the validation split when the label step carved one (never the test
    data), else the main task."""
    return VALIDATION_TASK if ctx.validation_task is not None else tasks(ctx)[ctx.config.main_task].name


def care_tolerance(ctx: RunContext) -> float:
    """How far below the best trained model CARE may score on the selection task and still be served:
    ``index.care_tolerance``, else the safety net's ``validation.tolerance``."""
    tolerance = ctx.config.index.care_tolerance
    return ctx.config.validation.tolerance if tolerance is None else tolerance


def choose_served(scores: dict[str, float], care: str | None, tolerance: float) -> tuple[str, str]:
    """``(row label, why)`` of the model to serve among trained models' ``scores`` on the selection task: CARE
    (row ``care``) when it is within ``tolerance`` of the best (its query side is the cheap one), else the best.

    >>> choose_served({"symmetric large": 0.70, "CARE": 0.695}, "CARE", 0.01)[0]
    'CARE'
    >>> choose_served({"symmetric large": 0.70, "CARE": 0.68}, "CARE", 0.01)[0]
    'symmetric large'
    """
    best = max(scores, key=lambda k: scores[k])
    if care is not None and care != best and care in scores and scores[care] >= scores[best] - tolerance:
        return care, (f"CARE within {tolerance:g} of the best trained model ({best}, "
                      f"{scores[care] - scores[best]:+.4f}): the small query tower")
    return best, "the best trained model"


def best_model(ctx: RunContext) -> tuple[str, str]:
    """``(row label, model spec)`` of the model the index is built with: ``index.model``, else, among the trained
    models (not references, not ONNX rows) scored on :func:`selection_task`, CARE when it is within
    :func:`care_tolerance` of the best, else the best (:func:`choose_served`)."""
    return _served(ctx)[:2]


def _served(ctx: RunContext) -> tuple[str, str, str]:
    """``(row label, model spec, why)`` of :func:`best_model`."""
    trained = ctx.trained_models()
    chosen = ctx.config.index.model
    if chosen is not None:
        if chosen not in trained:
            raise CareError(f"index.model {chosen!r} is not a trained model of this run; choose from {', '.join(trained)}")
        return chosen, trained[chosen], "index.model"
    if not trained:
        raise CareError("no trained model to index: enable a recipe (recipes.care / recipes.student / recipes.baselines)")
    on = selection_task(ctx)
    scores = {r.model: r.main_value for r in load_results(ctx) if r.task == on and r.model in trained}
    if not scores:
        raise CareError(f"no evaluation of the trained models on {on}: run the 'evaluate' step first")
    label, why = choose_served(scores, ctx.config.recipes.care.labels.get("stage2"), care_tolerance(ctx))
    return label, trained[label], f"{why} on {on}"


def serving_warnings(ctx: RunContext, label: str) -> list[str]:
    """Why the model ``label`` should not be served as it is: each dense reference model (e5 zero-shot) and
    the symmetric small model it scores below on the selection task (validation), as sentences."""
    from care.encoders.registry import BM25_TOKENIZERS

    on = selection_task(ctx)
    scores = {r.model: r.main_value for r in load_results(ctx) if r.task == on}
    if label not in scores:
        return []
    lexical = {ref for ref, spec in ctx.config.models.references.items() if spec.split("?", 1)[0].lower() in BM25_TOKENIZERS}
    symmetric_small = ctx.config.recipes.care.labels.get("init_query")
    rivals = [ref for ref in ctx.config.models.references if ref not in lexical and ref != label]
    if symmetric_small and symmetric_small != label and symmetric_small in ctx.trained_models():
        rivals.append(symmetric_small)
    return [f"{label} scores below {rival} on {on} ({scores[label]:.4f} < {scores[rival]:.4f})"
            for rival in rivals if rival in scores and scores[label] < scores[rival]]


def step_index(ctx: RunContext) -> dict[str, Any]:
    """Encode the corpus with the best model's document side and build the index (resumable)."""
    from care.index.build import BuildOptions, build
    from care.index.config import IndexConfig

    label, spec, how = _served(ctx)
    model = str(Path(spec).resolve()) if Path(spec).exists() else spec
    options = BuildOptions(model=model, corpus=corpus_file(ctx), output=ctx.root / INDEX_FOLDER,
                           index=IndexConfig.from_dict({"type": ctx.config.index.type}),
                           cache_dir=ctx.cache_dir(EMBEDDINGS_CACHE))  # the evaluation's vectors of this corpus
    manifest = build(options)
    if manifest is None:
        raise CareError(f"index build in {options.output} did not merge; rerun the same command to finish it")
    logger.info("index: %d documents with %s (%s; %s)", manifest.n_docs, label, how, model)
    warnings = serving_warnings(ctx, label)
    for warning in warnings:
        logger.warning("index: %s — serving it anyway; choose another with index.model, or improve the recipe", warning)
    alternative = care_alternative(ctx, label)
    if alternative:
        logger.info("index: %s", alternative)
    return {"index": str(options.output), "label": label, "model": model, "documents": manifest.n_docs,
            "dim": manifest.dim, "type": manifest.index.get("type"), "chosen_by": how, "warnings": warnings,
            "copied_from_cache": sum(int(shard.get("copied_rows", 0)) for shard in manifest.shards),
            "care_alternative": alternative}


def care_alternative(ctx: RunContext, label: str) -> str | None:
    """When the index step chose another model than CARE (e.g. symmetric large, whose query side is the large
    tower), a sentence saying how CARE scored on the selection task and how to serve it instead; else None."""
    care = ctx.config.recipes.care.labels.get("stage2")
    if not care or care == label or care not in ctx.trained_models():
        return None
    on = selection_task(ctx)
    scores = {r.model: r.main_value for r in load_results(ctx) if r.task == on}
    if care not in scores or label not in scores:
        return None
    return (f"{care} (the small query tower) scores {scores[care]:.4f} on {on}, {scores[care] - scores[label]:+.4f} "
            f"against {label}; serve it instead with --set index.model='{care}'")
