"""The served query tower of a budgeted ``care run``, trained, before and after its vocabulary cut (issue 58;
``benchmarks/vocab_pruning_trained.py`` is its page).

:mod:`care.experiments.vocab_pruning` cut e5's vocabulary *before* training. Here the cut is the one ``care run``
makes on a trained tower (``recipes.care.prune_query_vocabulary``,
:func:`care.pipeline.served_vocabulary.prune_served_query`: the corpus and the labelled rows' texts, never the test
queries). Given a finished run folder whose ``train_care`` trained CARE, :func:`measure` cuts its CARE model exactly
so (unless the run did; ``recut``: again, with this code) and measures, against one document side (the trained large
tower's vectors of the run's corpus, computed once):

* the main task's nDCG@10 (its test split) with the full-vocabulary and the cut query tower, PyTorch fp32 and ONNX
  int8 (``care export-onnx``), and the size of each int8 file;
* on the test queries (not among the vocabulary's texts): how many are segmented differently, and the cosine between
  the two towers' fp32 vectors.

:func:`markdown` is the report beside the record.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from care.bench.locations import portable
from care.bench.record import BenchmarkRecord

logger = logging.getLogger(__name__)

EXPERIMENT = "frontier"
#: The record's name: ``<RECORD_PREFIX><name>``.
RECORD_PREFIX = "vocab_pruning_trained_"
FULL, PRUNED = "full vocabulary", "run's vocabulary"
#: A test query whose two fp32 vectors' cosine is below this was encoded differently.
SAME_VECTOR_COSINE = 0.9999
MIB = 2 ** 20
#: What every record of this experiment says of itself.
CAVEAT = "one run of the demo data, one seed: a check of the cut on a trained tower, not a result on a real data set"


def _cut(ctx, outputs: dict[str, Any], recut: bool) -> dict[str, Any]:
    """The run's cut (``train_care``'s ``query_vocabulary`` output), or one made now (none, not served, or
    ``recut``)."""
    from care.pipeline.served_vocabulary import OUTPUT_KEY, prune_served_query

    done = outputs.get(OUTPUT_KEY)
    models = dict(outputs["models"], **({done["label"]: done["full_vocabulary_model"]} if recut and done else {}))
    served = done and done.get("served", True)  # a run whose validation check kept the full vocabulary: cut it now
    cut = (not recut and served and done) or prune_served_query(ctx, models)
    if not cut:
        raise SystemExit(f"{ctx.root}: the run has no CARE model to cut")
    return cut


def measure(run: Path, work: Path, *, name: str, recut: bool = False, note: str = "") -> BenchmarkRecord:
    """The record (command and commit left to :func:`care.bench.record.write_record`) of the run's CARE query tower
    with each vocabulary; ONNX exports in ``work`` (one folder per vocabulary size)."""
    import numpy as np

    from care.bench.options import RunOptions
    from care.bench.registry import split_files_of
    from care.bench.runner import evaluate
    from care.data.retrieval import load_queries
    from care.encoders.cache import EmbeddingCache
    from care.encoders.onnx import INT8_FILE, OnnxQueryEncoder
    from care.encoders.pair import AsymmetricEncoder
    from care.encoders.sides import load_side
    from care.models.onnx_export import export_query_encoder
    from care.pipeline.config import RunConfig
    from care.pipeline.context import EMBEDDINGS_CACHE, RunContext
    from care.pipeline.manifest import RunManifest
    from care.pipeline.sources import main_task

    manifest = RunManifest.load(run)
    if manifest is None or not manifest.is_done("train_care"):
        raise SystemExit(f"{run}: no finished care run with a train_care step")
    ctx = RunContext(RunConfig.from_dict(manifest.config, source=str(manifest.path)), run, manifest)
    outputs = ctx.step_outputs("train_care")
    cut = _cut(ctx, outputs, recut)
    specs = {FULL: cut["full_vocabulary_model"], PRUNED: cut["model"]}
    task = main_task(ctx)
    documents = load_side(specs[FULL], "document")  # one document side: the cut copies it unchanged
    options = RunOptions(cache=EmbeddingCache(ctx.cache_dir(EMBEDDINGS_CACHE)), show_progress=False)
    scores, sizes, queries = {}, {}, {}
    for label, spec in specs.items():
        vocabulary = cut["vocab_before" if label == FULL else "vocab_after"]
        export = work / f"onnx-vocab{vocabulary}"  # one per cut
        if not (export / INT8_FILE).is_file():
            export_query_encoder(spec, export, quantize=True)
        query = load_side(spec, "query")
        towers = {"fp32": query, "int8": OnnxQueryEncoder(export, int8=True, threads=1)}
        scores[label] = {f"ndcg_at_10 {engine}": round(evaluate(AsymmetricEncoder(tower, documents), task, options,
                                                                label=f"{label}, {engine}").scores["ndcg_at_10"], 4)
                         for engine, tower in towers.items()}
        sizes[label] = {"int8_file_mib": round((export / INT8_FILE).stat().st_size / MIB, 1), "vocabulary": vocabulary,
                        "parameters": cut["parameters_before" if label == FULL else "parameters_after"]}
        queries[label] = query
    texts = list(load_queries(split_files_of(task)[0]).values())
    a, b = (queries[label].encode_queries(texts) for label in (FULL, PRUNED))
    cosine = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    agreement = {"test_queries": len(texts), "encoded_differently": int((cosine < SAME_VECTOR_COSINE).sum()),
                 "min_cosine": round(float(cosine.min()), 4), "mean_cosine": round(float(cosine.mean()), 4)}
    budget = outputs.get("query_budget") or {}
    drop = {engine: round(scores[PRUNED][f"ndcg_at_10 {engine}"] - scores[FULL][f"ndcg_at_10 {engine}"], 4)
            for engine in ("fp32", "int8")}
    return BenchmarkRecord(
        experiment=EXPERIMENT, name=f"{RECORD_PREFIX}{name}",
        config={"run": portable(str(run)), "task": task.name,
                "query_tower": budget.get("query_spec") or ctx.config.models.query,
                "query_speedup": budget.get("budget"), "vocabulary_files": portable(cut["vocabulary_files"])},
        seeds=[ctx.config.seed], scores=scores,
        extra={"sizes": sizes, "ndcg_at_10_change": drop, "test_query_agreement": agreement,
               "vocabulary_texts": cut["texts"], "query_budget_speedups": budget.get("speedups"),
               "note": f"{CAVEAT}. {note}".strip()})


def markdown(record: BenchmarkRecord, record_path: str) -> list[str]:
    """The report beside the record: the two towers' sizes and scores, the change, the test queries' agreement."""
    config, extra, scores = record.config, record.extra, record.scores
    sizes, agreement, drop = extra["sizes"], extra["test_query_agreement"], extra["ndcg_at_10_change"]
    picked = f"picked for a {config['query_speedup']:g}x query budget" if config["query_speedup"] else \
        "named by the run config"
    rows = [f"| {label} | {sizes[label]['vocabulary']:,} | {sizes[label]['parameters'] / 1e6:.1f} M | "
            f"{sizes[label]['int8_file_mib']:.1f} | {scores[label]['ndcg_at_10 fp32']:.4f} | "
            f"{scores[label]['ndcg_at_10 int8']:.4f} |" for label in (FULL, PRUNED)]
    note = extra["note"][0].upper() + extra["note"][1:]
    return [f"# The served query tower of a budgeted care run, trained, before and after its vocabulary cut — "
            f"{record.name.removeprefix(RECORD_PREFIX)}", "",
            f"`{config['query_tower']}` {picked}, trained by `care run` (seed {record.seeds[0]}); its vocabulary cut to "
            f"the {extra['vocabulary_texts']:,} texts of {', '.join(Path(f).name for f in config['vocabulary_files'])} "
            f"(`recipes.care.prune_query_vocabulary`). Test nDCG@10 of {config['task']} ({agreement['test_queries']} "
            f"queries, none among those texts) against the same document vectors. {note}", "",
            "| query tower | vocabulary | parameters | ONNX int8 file (MiB) | nDCG@10 fp32 | nDCG@10 int8 |",
            "|---|---|---|---|---|---|", *rows, "",
            f"Change with the cut: {drop['fp32']:+.4f} nDCG@10 (fp32), {drop['int8']:+.4f} (int8). Test queries "
            f"encoded differently (fp32 cosine < {SAME_VECTOR_COSINE}): {agreement['encoded_differently']} of "
            f"{agreement['test_queries']}; min / mean cosine to the full vocabulary's vector "
            f"{agreement['min_cosine']:.4f} / {agreement['mean_cosine']:.4f}.", "",
            f"Command: `{record.command}` (commit {record.commit}); record: `{record_path}`."]
