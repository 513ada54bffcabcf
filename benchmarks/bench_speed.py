"""Speed of the path to production: query encoding, document-encoder cost, vector search, the service.

Every figure is a median over ``--repeats`` runs, measured side by side in one process, one thread
(``--threads``) unless stated. Sections (``--sections``, default all; results merge into one JSON):

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
* ``service`` — ``care index build`` of the dev corpus with that model, ``care serve`` on loopback
  with the ONNX int8 query encoder: direct encode + search p50 vs HTTP p50 (one client), then
  ``--clients`` concurrent clients for ``--load-seconds`` (bounded, stops by itself): QPS, p50, p99,
  5xx, dropped.
* ``plot`` — quality (from ``benchmarks/results/*.json`` bench results, when present) against
  queries/s, like the paper's Figure 1.

    OMP_NUM_THREADS=1 python benchmarks/bench_speed.py --out benchmarks/results/speed.json
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

logger = logging.getLogger("bench_speed")

DEV_DIR = Path(os.environ.get("CARE_DEV_DATA", Path(__file__).resolve().parents[2] / "shared" / "data" / "toyhom_neike_sample"))
RESULTS = Path(__file__).resolve().parent / "results"
THROUGHPUT_BATCH = 32
LATENCY_QUERIES = 32
PAPER_DEPTH = 36
TOP_K = 10
CLUSTERS = 1000
MIN_ENCODE_S = 1e-3
CLUSTER_SPREAD = 0.05
QUERY_NOISE = 0.5
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


def load_queries(n: int) -> list[str]:
    path = DEV_DIR / "test_queries.jsonl"
    if path.is_file():
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
    corpus = DEV_DIR / "corpus.jsonl"
    if corpus.is_file():
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
    rows: dict[str, Any] = {}
    for name, enc in encoders.items():
        latency = median_time(lambda: [enc.encode_queries([q]) for q in single], repeats) / len(single)
        per_batch = median_time(lambda: enc.encode_queries(batch, batch_size=THROUGHPUT_BATCH), repeats)
        rows[name] = {"latency_ms_b1": round(latency * 1000, 3), "throughput_qps_b32": round(THROUGHPUT_BATCH / per_batch, 1),
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
        latency = median_time(lambda: [run([n]) for n in single_lengths[:8]], repeats) / 8 * scale
        per_batch = median_time(lambda: run(batch_lengths), max(1, repeats // 2)) * scale
        rows[f"doc-{shape.name}"] = {
            "latency_ms_b1": round(latency * 1000, 3), "throughput_qps_b32": round(THROUGHPUT_BATCH / per_batch, 2),
            "parameters": count_parameters(shape), "measured_layers": llm_layers, "scaled_to_layers": PAPER_DEPTH,
        }
        logger.info("%s: %s", shape.name, rows[f"doc-{shape.name}"])
        del model
    int8, fp32 = rows["onnx-int8"], rows["torch-fp32"]
    return {
        "query_model": {"shape": "gte-multilingual-base (XLM-R 12x768)", "parameters_measured": params_query,
                        "parameters_with_250k_vocab": count_parameters("gte-multilingual-base"),
                        "vocab": len(tokenizer), "mean_query_tokens": round(float(np.mean(lengths)), 1)},
        "rows": rows,
        "onnx_int8_speedup_b1": round(fp32["latency_ms_b1"] / int8["latency_ms_b1"], 2),
        "query_vs_llm_b1": {k: round(rows[k]["latency_ms_b1"] / int8["latency_ms_b1"], 1) for k in rows if k.startswith("doc-")},
        "query_vs_llm_b1_torch": {k: round(rows[k]["latency_ms_b1"] / fp32["latency_ms_b1"], 1) for k in rows if k.startswith("doc-")},
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
                    lat = [median_time(lambda q=q: index.search(q[None], TOP_K), repeats, warmup=0) for q in queries[:50]]
                    row = {"data": kind, "type": name, "n": n, "dim": dim, "param": {"hnsw": "ef_search", "flat": None}.get(name, "nprobe"),
                           "value": setting, "build_s": round(build_s, 1), "p50_ms": round(statistics.median(lat) * 1000, 3),
                           "recall@10": round(recall, 4)}
                    rows.append(row)
                    logger.info("index: %s", row)
                del index, raw
            del data
    return {"rows": rows, "threads": faiss.omp_get_max_threads(), "note": (
        "queries are database vectors plus small noise (each has a near neighbour, as real queries do); 'random' = uniform "
        "unit vectors (no neighbourhood structure beyond that one neighbour: the worst case for approximate search), "
        f"'clustered' = unit vectors around {CLUSTERS} centres (closer to real embeddings). faiss-cpu here loads its generic "
        "build (no AVX2 library available), one thread.")}


# --------------------------------------------------------------------------------------------- service
def bench_service(work: Path, repeats: int, clients: int, load_seconds: float) -> dict[str, Any]:
    from care.index.build import BuildOptions, build
    from care.serve.app import create_app
    from care.serve.engine import load_engine
    from care.serve.loadgen import run_load
    from care.serve.server import serve_in_thread
    import httpx

    from care.serve.testing import SAMPLE_DOCS, write_corpus

    queries = load_queries(200)
    model_dir = bench_model_dir(work, queries)
    onnx_dir = work / "onnx"
    if not (onnx_dir / "model.int8.onnx").is_file():
        from care.models.onnx_export import export_query_encoder

        export_query_encoder(str(model_dir), onnx_dir, quantize=True)
    corpus = DEV_DIR / "corpus.jsonl"
    if not corpus.is_file():
        corpus = write_corpus(work / "corpus.jsonl", SAMPLE_DOCS)
    index_dir = work / "service-index"
    started = time.perf_counter()
    build(BuildOptions(model=str(model_dir), corpus=corpus, output=index_dir, batch_size=16, chunk_size=512,
                       index=__import__("care.index.config", fromlist=["IndexConfig"]).IndexConfig(type="flat")))
    build_s = time.perf_counter() - started
    engine = load_engine(index_dir, onnx_dir=onnx_dir, int8=True, onnx_threads=1)
    sample = queries[:50]

    per_direct = []
    for q in sample * max(1, repeats // 2):
        t = time.perf_counter()
        (found,) = engine.search_vectors([q], [TOP_K], instruction=None)
        engine.hits(found, TOP_K, None)
        per_direct.append(time.perf_counter() - t)
    with serve_in_thread(create_app(engine)) as url, httpx.Client(base_url=url, timeout=30) as client:
        per_http = []
        for q in sample * max(1, repeats // 2):
            t = time.perf_counter()
            r = client.post("/search", json={"query": q, "k": TOP_K})
            per_http.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
        report = run_load(url, queries, clients=clients, duration_s=load_seconds, k=TOP_K)
        batch_metrics = [line for line in client.get("/metrics").text.splitlines() if line.startswith("care_batch_size_")]
    direct_p50, http_p50 = statistics.median(per_direct) * 1000, statistics.median(per_http) * 1000
    return {
        "corpus_docs": engine.bundle.manifest.n_docs, "index_build_s": round(build_s, 1), "query_encoder": engine.query_encoder.name,
        "direct_p50_ms": round(direct_p50, 3), "http_p50_ms": round(http_p50, 3),
        "service_overhead_p50": round(http_p50 / direct_p50 - 1, 3),
        "load": report.to_dict(), "batch_metrics": [m for m in batch_metrics if "_sum" in m or "_count" in m],
    }


# --------------------------------------------------------------------------------------------- plot
def quality_points(folders: list[Path]) -> list[dict[str, Any]]:
    """(model, task, main score, query q/s) from care bench results: TaskResult dicts found in JSON files.

    q/s = ``stats.n_queries / timings.encode_queries_s`` (the harness's own query-encoding timing; runs
    served from the embedding cache, with no encoding time, are left out).
    """
    points: list[dict[str, Any]] = []

    def walk(obj: Any, source: str) -> None:
        if isinstance(obj, dict):
            scores, timings, stats = obj.get("scores"), obj.get("timings"), obj.get("stats")
            if isinstance(obj.get("model"), str) and isinstance(scores, dict) and isinstance(timings, dict) and isinstance(stats, dict):
                seconds, n = timings.get("encode_queries_s") or 0.0, stats.get("n_queries") or 0
                if obj.get("main_score") in scores and seconds > MIN_ENCODE_S and n:
                    points.append({"model": obj["model"], "task": obj.get("task"), "score": float(scores[obj["main_score"]]),
                                   "metric": obj["main_score"], "qps": round(n / seconds, 2), "source": source})
            for value in obj.values():
                walk(value, source)
        elif isinstance(obj, list):
            for value in obj:
                walk(value, source)

    for folder in folders:
        for path in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
            if path.name.startswith("speed"):
                continue
            try:
                walk(json.loads(path.read_text(encoding="utf-8")), str(path.relative_to(folder)))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
    return points


def plot(results: dict[str, Any], png: Path, folders: list[Path]) -> dict[str, Any]:
    """Quality (retrieval main score of evaluated models) against query q/s, with the measured encoder speeds.

    Points: models evaluated by ``care bench`` on a retrieval task (q/s = the harness's query-encoding
    throughput). Vertical lines: batch-1 q/s of the encoders measured in the ``encoders`` section (CARE
    query tower in torch / ONNX / int8, and the LLM document towers a symmetric model would run online).
    """
    from care.bench.figure import QualityPoint, quality_speed_figure

    points = quality_points(folders)
    retrieval = [p for p in points if "retriev" in str(p["task"]).lower()]
    task = max({p["task"] for p in retrieval}, key=lambda t: sum(p["task"] == t for p in retrieval)) if retrieval else None
    shown = [p for p in retrieval if p["task"] == task]
    speeds = {name: 1000 / row["latency_ms_b1"] for name, row in results.get("encoders", {}).get("rows", {}).items()}
    quality_speed_figure([QualityPoint(p["model"], p["score"], p["qps"]) for p in shown], png, speed_lines=speeds,
                         ylabel=f"{shown[0]['metric']} on {task}" if shown else "no evaluated retrieval results found",
                         xlabel="queries/s on CPU, log (points: care bench query encoding; lines: batch-1 encoders)")
    return {"png": png.name, "task": task, "quality_points": shown, "encoder_qps_b1": {k: round(v, 3) for k, v in speeds.items()}}


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
                  "| encoder | batch-1 latency (ms) | batch-32 throughput (q/s) | min cosine to torch |", "|---|---|---|---|"]
        for name, row in enc["rows"].items():
            lines.append(f"| {name} | {row['latency_ms_b1']} | {row['throughput_qps_b32']} | {row.get('min_cosine_to_torch', '')} |")
        lines += ["", f"ONNX int8 vs torch fp32 at batch 1: **{enc['onnx_int8_speedup_b1']}×** (target ≥ 2.5×).",
                  f"LLM document encoder / CARE query encoder (ONNX int8) at batch 1: {enc['query_vs_llm_b1']} (target ≥ 10×); "
                  f"vs torch fp32 query encoder: {enc['query_vs_llm_b1_torch']}.", ""]
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
    svc = results.get("service")
    if svc:
        load = svc["load"]
        lines += ["## Service on loopback", "",
                  f"{svc['corpus_docs']} documents (flat index), query encoder {svc['query_encoder']}.", "",
                  f"- direct encode + search + lookup p50: {svc['direct_p50_ms']} ms; over HTTP (one client): {svc['http_p50_ms']} ms "
                  f"→ service overhead {svc['service_overhead_p50'] * 100:.1f}% (target ≤ 20%)",
                  f"- {load['clients']} concurrent clients for {load['duration_s']} s: {load['requests']} requests, "
                  f"{load['qps']} q/s, p50 {load['p50_ms']} ms, p99 {load['p99_ms']} ms, status {load['status']}, "
                  f"5xx {load['server_errors']}, dropped {load['dropped']}", ""]
    if results.get("plot"):
        fig = results["plot"]
        lines += ["## Figure", "", f"![quality vs speed]({fig['png']})", "",
                  f"Evaluated models ({fig.get('task')}): " + (", ".join(f"{p['model']} {p['metric']}={p['score']:.4f} at {p['qps']} q/s"
                  for p in fig.get("quality_points", [])) or "none found") + ". Only models with quality results appear as points; "
                  "the CARE and LLM encoders of the speed section have random weights, so they appear as speed lines only.", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="encoders,index,service,plot", help="any of encoders,index,service,plot,report (report = rewrite the .md only)")
    parser.add_argument("--out", type=Path, default=RESULTS / "speed.json")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "care-bench-speed")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--llm-layers", type=int, default=2)
    parser.add_argument("--index-sizes", default="100000,1000000")
    parser.add_argument("--index-dim", type=int, default=768)
    parser.add_argument("--bench-results", default=str(RESULTS), help="Comma-separated folders with care bench result JSON files.")
    parser.add_argument("--index-data", default="random,clustered")
    parser.add_argument("--hnsw-max", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    command = "python benchmarks/bench_speed.py " + " ".join(os.sys.argv[1:])
    created = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    measured = [name for name in args.sections.split(",") if name in ("encoders", "index", "service", "plot")]
    if measured:
        results.setdefault("runs", []).append({"command": command, "sections": measured, "created": created})
    results.update(command=command, created=created,
                   machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), {args.threads} thread(s), CPU only, no GPU lent")
    sections = args.sections.split(",")
    if "encoders" in sections:
        results["encoders"] = bench_encoders(args.work, args.repeats, args.llm_layers)
    if "index" in sections:
        fresh = bench_index([int(s) for s in args.index_sizes.split(",")], args.index_dim, args.repeats, 200, args.hnsw_max,
                                       args.index_data.split(","))
        measured = {(r["data"], r["n"]) for r in fresh["rows"]}
        kept = [r for r in results.get("index", {}).get("rows", []) if (r["data"], r["n"]) not in measured]
        results["index"] = {**fresh, "rows": sorted(kept + fresh["rows"], key=lambda r: (r["data"], r["n"]))}
    if "service" in sections:
        results["service"] = bench_service(args.work, args.repeats, args.clients, args.load_seconds)
    if "plot" in sections:
        results["plot"] = plot(results, args.out.with_suffix(".png"), [Path(p) for p in args.bench_results.split(",")])
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    write_markdown(results, args.out.with_suffix(".md"))
    logger.info("wrote %s and %s", args.out, args.out.with_suffix(".md"))


if __name__ == "__main__":
    main()
