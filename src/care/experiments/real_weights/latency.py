"""Query latency of the real-weights table (``bench_real_weights --summarise --latency``), measured side by side.

:func:`query_latency` times single queries (batch 1, one thread) through e5's 12-layer query side and its strided
cuts, exported to ONNX fp32 and int8, each with its speed-up over symmetric large's query side in the same engine;
twice: interleaved per query (every call follows another tower's: the conservative figure) and back to back
(:data:`~care.bench.reports.frontier_towers.BACK_TO_BACK`). Latency depends on the shape, not the weights: the
untrained cuts time exactly as the trained towers.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from urllib.parse import quote

from care.bench.reports.frontier_towers import BACK_TO_BACK, BM25_LATENCY  # the rows' names (the frontier reads them)
from care.data.io import iter_jsonl
from care.experiments.real_weights.towers import e5_cuts, e5_narrow, ensure_e5
from care.models.e5_export import QUERY_PREFIX

logger = logging.getLogger("bench_real_weights")

__all__ = ["BACK_TO_BACK", "BM25_LATENCY", "query_latency"]

#: Rows timed with ``transformers``' tokenizer call instead of the Rust tokenizer (care.encoders.token_feeds).
TOKENIZER_CALL = "transformers tokenizer call"
#: The engine BM25's speed-up is taken against (it has no query encoder, so no engine of its own to match).
BM25_REFERENCE_ENGINE = "onnxruntime int8"
#: The keys of the latency self-checks (interleaved, back to back) among the rows.
SELF_CHECK, SELF_CHECK_BACK_TO_BACK = "_self_check", "_self_check_back_to_back"
#: Test queries timed.
LATENCY_QUERIES = 50
#: e5's full depth: symmetric large's query side.
E5_LAYERS = 12


def _towers(args: argparse.Namespace, e5: Path) -> tuple[dict, dict]:
    """The ONNX query towers to time and their engines: e5, its cuts (fp32, int8), the narrowed cuts (int8), and
    the 12-layer and shallowest int8 graphs with ``transformers``' tokenizer call."""
    from care.encoders.onnx import OnnxQueryEncoder
    from care.models.onnx_export import export_query_encoder

    models, engines = {}, {}
    depths = sorted(set(args.latency_layers), reverse=True)
    # narrowed cuts of 2+ layers (a 1-layer tower's time is mostly fixed cost), int8 only: every session holds its
    # own copy of e5's 250k-row embedding table (~0.4 GB), so all of them at once would not fit in 24 GB
    towers = [(E5_LAYERS, None), *((d, None) for d in depths),
              *((d, w) for w in args.latency_ffn for d in depths if d > 1)]
    for layers, width in towers:  # (depth, feed-forward width or None): the cuts, then the narrowed cuts
        base = (e5 if layers == E5_LAYERS and not width else
                e5_narrow(e5, layers, width, args.work) if width else e5_cuts(e5, layers, args.work))
        folder = args.work / "latency" / (f"L{layers}" + (f"-ffn{width}" if width else ""))
        if not (folder / "model.int8.onnx").is_file():
            export_query_encoder(f"{base}?pooling=mean&query_prefix={quote(QUERY_PREFIX)}&instructions=false",
                                 folder, quantize=True)
        for int8 in ((True,) if width else (False, True)):
            label = (f"{layers} layers" + (f", FFN {width}" if width else "")
                     + (" (symmetric large's query side)" if layers == E5_LAYERS and not width else ""))
            key = f"{label}, ONNX {'int8' if int8 else 'fp32'}"
            models[key] = OnnxQueryEncoder(folder, int8=int8, threads=1)
            engines[key] = f"onnxruntime {'int8' if int8 else 'fp32'}"
    for layers in (E5_LAYERS, min(args.latency_layers)):  # the same graphs with transformers' tokenizer call
        label = f"{layers} layers" + (" (symmetric large's query side)" if layers == E5_LAYERS else "")
        key = f"{label}, ONNX int8, {TOKENIZER_CALL}"
        models[key] = OnnxQueryEncoder(args.work / "latency" / f"L{layers}", int8=True, threads=1,
                                       direct_tokenizer=False)
        engines[key] = f"onnxruntime int8, {TOKENIZER_CALL}"
    return models, engines


def query_latency(args: argparse.Namespace) -> dict[str, dict]:
    """Single-query latency of e5's 12-layer query side and its strided cuts, ONNX fp32 and int8, side by side;
    the 12-layer and shallowest int8 graphs also with ``transformers``' tokenizer call (the fixed cost the
    direct Rust tokenizer removes), each compared with the 12-layer graph under the same tokenizer path; all of
    it twice: interleaved per query and back to back (:data:`BACK_TO_BACK`). With ``args.latency_bm25`` also BM25
    answering each query from the test split's corpus (:data:`BM25_LATENCY`: tokenising, scoring every document, the
    top 10; a tower's time stops at its vector).

    ``args``: ``e5`` (the exported e5 folder), ``work``, ``data`` (the dev set), ``latency_layers``,
    ``latency_ffn``, ``latency_bm25``. Returns ``{row: {engine, p50_ms, ..., large_over_this}}`` and the two
    self-checks (:data:`SELF_CHECK`, :data:`SELF_CHECK_BACK_TO_BACK`).
    """
    from care.bench.latency import LatencySettings, measure_latency
    from care.encoders.onnx import OnnxQueryEncoder

    e5 = ensure_e5(args.e5)
    queries = [r["text"] for _, r in iter_jsonl(args.data / "test_queries.jsonl")][:LATENCY_QUERIES]
    models, engines = _towers(args, e5)
    if args.latency_bm25:
        from care.data.retrieval import load_retrieval_folder
        from care.encoders.bm25 import BM25Retriever

        corpus = load_retrieval_folder(args.data, split="test").corpus
        models[BM25_LATENCY] = BM25Retriever()
        models[BM25_LATENCY].index(list(corpus), [doc.full_text for doc in corpus.values()])
        engines[BM25_LATENCY] = "bm25s"
    control = next(k for k in models if k.endswith("ONNX int8") and not k.startswith(f"{E5_LAYERS} "))
    copy = OnnxQueryEncoder(models[control].folder, int8=True, threads=1)
    out: dict[str, dict] = {}
    for suffix, settings in (("", LatencySettings()), (BACK_TO_BACK, LatencySettings(block_calls=len(queries) // 2))):
        report = measure_latency(models, queries, control=(control, copy), settings=settings)
        logger.info("latency%s: %s", suffix, report.self_check.describe())
        for k in report.medians():  # the speed-up over symmetric large's query side in the same engine
            engine = BM25_REFERENCE_ENGINE if k == BM25_LATENCY else engines[k]
            same_engine_large = next(m for m in models if m.startswith(f"{E5_LAYERS} ") and engines[m] == engine)
            out[k + suffix] = {"engine": engines[k], **report.models[k].to_dict(),
                               "large_over_this": report.ratio(same_engine_large, k) if k != same_engine_large else 1.0}
        out[SELF_CHECK_BACK_TO_BACK if suffix else SELF_CHECK] = {
            "engine": "", "description": report.self_check.describe(), "passed": report.trusted}
    return out
