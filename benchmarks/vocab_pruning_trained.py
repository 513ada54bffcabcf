"""The served query tower of a budgeted ``care run``, trained, before and after its vocabulary cut (issue 58).

``benchmarks/vocab_pruning.py`` cut e5's vocabulary *before* training. Here the cut is the one ``care run`` makes on a
trained tower (``recipes.care.prune_query_vocabulary``, :func:`care.pipeline.served_vocabulary.prune_served_query`:
the corpus and the labelled rows' texts, never the test queries). Given a finished run folder whose ``train_care``
trained CARE under ``recipes.care.query_speedup``, the script cuts its CARE model exactly so (unless the run did)
and measures, against one document side (the trained large tower's vectors of the run's corpus, computed once):

* the main task's nDCG@10 (its test split) with the full-vocabulary and the cut query tower, PyTorch fp32 and ONNX
  int8 (``care export-onnx``), and the size of each int8 file;
* on the test queries (not among the vocabulary's texts): how many are segmented differently, and the cosine
  between the two towers' fp32 vectors.

Writes ``benchmarks/results/frontier/vocab_pruning_trained_<name>.json`` (``care.bench.record``) and ``.md``.

Usage::

    care demo -o runs/demo_speedup5 --set recipes.care.query_speedup=5
    python -m benchmarks.vocab_pruning_trained --run runs/demo_speedup5 --name demo
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from benchmarks._common import RESULTS, ROOT, add_allow_dirty, pin_code, portable
from care.bench.record import BenchmarkRecord, write_record
from care.data.io import atomic_write

logger = logging.getLogger("vocab_pruning_trained")

EXPERIMENT = "frontier"
FULL, PRUNED = "full vocabulary", "run's vocabulary"
#: A test query whose two fp32 vectors' cosine is below this was encoded differently.
SAME_VECTOR_COSINE = 0.9999
MIB = 2 ** 20


def measure(run: Path, work: Path, recut: bool) -> tuple[dict, dict, dict, dict]:
    """``(scores, sizes, agreement, context)`` of the run's CARE query tower with each vocabulary."""
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
    from care.pipeline.served_vocabulary import OUTPUT_KEY, prune_served_query
    from care.pipeline.sources import main_task

    manifest = RunManifest.load(run)
    if manifest is None or not manifest.is_done("train_care"):
        raise SystemExit(f"{run}: no finished care run with a train_care step")
    ctx = RunContext(RunConfig.from_dict(manifest.config, source=str(manifest.path)), run, manifest)
    outputs = ctx.step_outputs("train_care")
    done = outputs.get(OUTPUT_KEY)
    models = dict(outputs["models"], **({done["label"]: done["full_vocabulary_model"]} if recut and done else {}))
    cut = (not recut and done) or prune_served_query(ctx, models)
    if cut is None:
        raise SystemExit(f"{run}: the run has no CARE model to cut")
    specs = {FULL: cut["full_vocabulary_model"], PRUNED: cut["model"]}
    task = main_task(ctx)
    documents = load_side(specs[FULL], "document")  # one document side: the cut copies it unchanged
    options = RunOptions(cache=EmbeddingCache(ctx.cache_dir(EMBEDDINGS_CACHE)), show_progress=False)
    scores, sizes, queries = {}, {}, {}
    for name, spec in specs.items():
        export = work / f"onnx-vocab{cut['vocab_before' if name == FULL else 'vocab_after']}"  # one per cut
        if not (export / INT8_FILE).is_file():
            export_query_encoder(spec, export, quantize=True)
        query = load_side(spec, "query")
        towers = {"fp32": query, "int8": OnnxQueryEncoder(export, int8=True, threads=1)}
        scores[name] = {f"ndcg_at_10 {engine}": round(evaluate(AsymmetricEncoder(tower, documents), task, options,
                                                               label=f"{name}, {engine}").scores["ndcg_at_10"], 4)
                        for engine, tower in towers.items()}
        sizes[name] = {"int8_file_mib": round((export / INT8_FILE).stat().st_size / MIB, 1),
                       "vocabulary": cut["vocab_before" if name == FULL else "vocab_after"],
                       "parameters": cut["parameters_before" if name == FULL else "parameters_after"]}
        queries[name] = query
    texts = list(load_queries(split_files_of(task)[0]).values())
    a, b = (queries[n].encode_queries(texts) for n in (FULL, PRUNED))
    cosine = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    agreement = {"test_queries": len(texts), "encoded_differently": int((cosine < SAME_VECTOR_COSINE).sum()),
                 "min_cosine": round(float(cosine.min()), 4), "mean_cosine": round(float(cosine.mean()), 4)}
    budget = outputs.get("query_budget") or {}
    context = {"cut": cut, "budget": budget, "seed": ctx.config.seed, "task": task.name,
               "tower": budget.get("query_spec") or ctx.config.models.query}
    return scores, sizes, agreement, context


def main() -> None:
    parser = add_allow_dirty(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument("--run", type=Path, required=True, help="a finished care run trained under a query budget")
    parser.add_argument("--name", default="demo", help="the record's name: vocabulary_pruning_trained_<name>")
    parser.add_argument("--work", type=Path, default=None, help="ONNX exports (default: <run>/vocab_pruning_trained)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--recut", action="store_true", help="cut the run's CARE model again with this code")
    parser.add_argument("--note", default="", help="how the run was made, for the record and its page")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.out, args)
    work = args.work or args.run / "vocab_pruning_trained"
    scores, sizes, agreement, context = measure(args.run, work, args.recut)
    cut, budget, tower = context["cut"], context["budget"], context["tower"]
    picked = f"picked for a {budget['budget']:g}x query budget" if budget else "named by the run config"
    drop = {engine: round(scores[PRUNED][f"ndcg_at_10 {engine}"] - scores[FULL][f"ndcg_at_10 {engine}"], 4)
            for engine in ("fp32", "int8")}
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=f"vocab_pruning_trained_{args.name}",
        config={"run": portable(str(args.run)), "task": context["task"], "query_tower": tower,
                "query_speedup": budget.get("budget"), "vocabulary_files": portable(cut["vocabulary_files"])},
        seeds=[context["seed"]], scores=scores,
        extra={"sizes": sizes, "ndcg_at_10_change": drop, "test_query_agreement": agreement,
               "vocabulary_texts": cut["texts"], "query_budget_speedups": budget.get("speedups"),
               "note": "one run of the demo data, one seed: a check of the cut on a trained tower, not a result "
                       f"on a real data set. {args.note}".strip()})
    path = write_record(record, args.out)
    rows = [f"| {name} | {sizes[name]['vocabulary']:,} | {sizes[name]['parameters'] / 1e6:.1f} M | "
            f"{sizes[name]['int8_file_mib']:.1f} | {scores[name]['ndcg_at_10 fp32']:.4f} | "
            f"{scores[name]['ndcg_at_10 int8']:.4f} |" for name in (FULL, PRUNED)]
    lines = [f"# The served query tower of a budgeted care run, trained, before and after its vocabulary cut — "
             f"{args.name}", "",
             f"`{tower}` {picked}, trained by `care run` "
             f"(seed {context['seed']}); its vocabulary cut to the {cut['texts']:,} texts of "
             f"{', '.join(Path(f).name for f in cut['vocabulary_files'])} (`recipes.care.prune_query_vocabulary`). "
             f"Test nDCG@10 of {context['task']} ({agreement['test_queries']} queries, none among those texts) "
             "against the same document vectors. One run of the demo data, one seed: a check of the cut on a trained "
             f"tower, not a result on a real data set. {args.note}".strip(), "",
             "| query tower | vocabulary | parameters | ONNX int8 file (MiB) | nDCG@10 fp32 | nDCG@10 int8 |",
             "|---|---|---|---|---|---|", *rows, "",
             f"Change with the cut: {drop['fp32']:+.4f} nDCG@10 (fp32), {drop['int8']:+.4f} (int8). Test queries "
             f"encoded differently (fp32 cosine < {SAME_VECTOR_COSINE}): {agreement['encoded_differently']} of "
             f"{agreement['test_queries']}; min / mean cosine to the full vocabulary's vector "
             f"{agreement['min_cosine']:.4f} / {agreement['mean_cosine']:.4f}.", "",
             f"Command: `{record.command}` (commit {record.commit}); record: `{path.relative_to(ROOT)}`."]
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(lines) + "\n")
    logger.info("wrote %s", path)


if __name__ == "__main__":
    main()
