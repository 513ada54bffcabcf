"""The curation pipeline measured (``benchmarks/bench_curate.py``; its Markdown: :mod:`care.curate.curation_report`).

- :func:`bench_anonymise`: span-level recall / precision per PII type on the "dense" labelled set
  (:func:`care.curate.pii.eval_set.generate_eval_set`, seed :data:`~care.curate.pii.eval_dense.DENSE_SEED`), throughput
  on the dev corpus (``$CARE_DEV_SET``; the demo corpus when unset) and spans removed per 1,000 real texts;
- :func:`bench_diversify`: texts/s and kept ratios of :func:`care.curate.diversify.diversify_file` with a hashing
  encoder over every dev query and document, and with multilingual-e5-small on a sample;
- :func:`bench_judge_overhead`: the judge runner's own time per pair against an OpenAI-compatible server that sleeps
  a fixed time per request (the caller starts it: ``care.testing.chat_server.FakeChatServer``).
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import numpy as np

from care.bench.locations import dev_set_or_none, portable
from care.curate.diversify import DiversifyConfig, diversify_file
from care.curate.judges.base import JudgePair
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.config import JudgeConfig
from care.curate.judges.openai_judge import OpenAIChatJudge
from care.curate.judges.runner import judge_pairs
from care.curate.pii.anonymiser import Anonymiser, anonymise_file
from care.curate.pii.eval_dense import DENSE_SEED
from care.curate.pii.eval_set import generate_eval_set
from care.curate.pii.scoring import score_eval_set
from care.data.io import iter_jsonl
from care.encoders.hashing import HashingCharEncoder

#: Labelled texts scored (a quarter with ``quick``).
LABELLED_TEXTS = 2000
#: Seconds the chat server sleeps a request, and the judge's concurrent requests.
SERVER_DELAY_S = 0.05
CONCURRENCY = 32
#: Judge pairs: queries (a quarter with ``quick``) x documents each.
JUDGE_QUERIES = 64
JUDGE_DOCS = 20
#: Texts of the e5 diversify runs (a quarter with ``quick``).
E5_QUERIES = 400
E5_DOCS = 60


def dev_rows(name: str) -> list[dict]:
    """The rows of the dev set's ``name`` (``$CARE_DEV_SET``), else of every embedded demo task's."""
    dev = dev_set_or_none()
    if dev is not None and (dev / name).is_file():
        return [row for _, row in iter_jsonl(dev / name)]
    from care.demo import demo_tasks_root  # fallback: the embedded demo benchmark

    root = Path(demo_tasks_root())
    rows = []
    for folder in sorted(p for p in root.iterdir() if (p / name).is_file()):
        rows += [row for _, row in iter_jsonl(folder / name)]
    return rows


def write_rows(rows: list[dict], path: Path) -> Path:
    """``rows`` as JSONL at ``path`` (returned)."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def bench_anonymise(tmp: Path, quick: bool) -> dict:
    """The anonymiser's scores on the dense labelled set, its throughput on real texts and their removals."""
    examples = generate_eval_set(LABELLED_TEXTS // (4 if quick else 1), seed=DENSE_SEED, style="dense")
    anonymiser = Anonymiser()
    scores = score_eval_set(examples, [anonymiser.find(line.text) for line in examples]).as_dict()
    docs = dev_rows("corpus.jsonl")
    if quick:
        docs = docs[:1000]
    src = write_rows([{"id": d["id"], "text": d["text"]} for d in docs], tmp / "anon_in.jsonl")
    Anonymiser().find("患者王建国，电话13812345678")  # load jieba outside the timing
    start = time.perf_counter()
    report = anonymise_file(src, tmp / "anon_out.jsonl", show_progress=False)
    elapsed = time.perf_counter() - start
    chars = sum(len(d["text"]) for d in docs)
    return {
        "labelled_set": {"texts": len(examples), "style": "dense", "seed": DENSE_SEED, "scores": scores},
        "throughput": {"texts": len(docs), "seconds": elapsed, "texts_per_s": len(docs) / elapsed,
                       "chars_per_s": chars / elapsed,
                       "corpus": portable(dev) if (dev := dev_set_or_none()) is not None and dev.is_dir() else "demo"},
        "real_corpus_detections_per_1000": {k: 1000 * v / len(docs) for k, v in report.removed.items()},
    }


def bench_diversify(tmp: Path, quick: bool) -> dict:
    """Diversify's texts/s and kept ratio with a hashing encoder (every text) and with e5 (a sample)."""
    queries = [{"id": q["id"], "text": q["text"]} for q in dev_rows("queries.jsonl")]
    docs = [{"id": d["id"], "text": d["text"]} for d in dev_rows("corpus.jsonl")]
    if quick:
        queries, docs = queries[:1500], docs[:1500]
    out = {}
    hashing = HashingCharEncoder()
    for role, rows in (("query", queries), ("document", docs)):
        src = write_rows(rows, tmp / f"div_{role}.jsonl")
        config = DiversifyConfig.for_role(role)
        config.calibration = "off"  # the paper's thresholds as given (bench_diversify_calibration.py measures the check)
        config.seed_size = min(config.seed_size, len(rows) // 4)
        start = time.perf_counter()
        report = diversify_file(src, tmp / f"div_{role}_out.jsonl", hashing, config, show_progress=False)
        elapsed = time.perf_counter() - start
        out[f"hashing_{role}"] = {"encoder": hashing.name, "texts": len(rows), "seed_size": config.seed_size,
                                  "threshold": config.threshold, "seconds": elapsed, "texts_per_s": len(rows) / elapsed,
                                  "kept": report["kept"], "kept_ratio": report["kept_ratio"],
                                  "example": report["examples"][:1]}
    from care.encoders.registry import load_model

    e5 = load_model("e5")
    rng = random.Random(0)
    for role, rows, n in (("query", queries, E5_QUERIES), ("document", docs, E5_DOCS)):
        sample = rng.sample(rows, min(n // (4 if quick else 1), len(rows)))
        src = write_rows(sample, tmp / f"e5_{role}.jsonl")
        config = DiversifyConfig.for_role(role)
        config.calibration = "off"  # the paper's thresholds as given (bench_diversify_calibration.py measures the check)
        config.seed_size = len(sample) // 4
        config.chunk_size = 64
        start = time.perf_counter()
        report = diversify_file(src, tmp / f"e5_{role}_out.jsonl", e5, config, show_progress=False)
        elapsed = time.perf_counter() - start
        out[f"e5_{role}"] = {"encoder": e5.name, "texts": len(sample), "seed_size": config.seed_size,
                             "threshold": config.threshold, "seconds": elapsed, "texts_per_s": len(sample) / elapsed,
                             "kept": report["kept"], "kept_ratio": report["kept_ratio"]}
        if role == "query":  # thresholds are encoder-specific: where do e5's nearest-neighbour similarities lie?
            vecs = e5.encode_queries([r["text"] for r in sample])
            sims = vecs @ vecs.T
            np.fill_diagonal(sims, -1.0)
            nearest = sims.max(axis=1)
            out["e5_query"]["nearest_neighbour_similarity_quantiles"] = {
                f"p{q}": float(np.percentile(nearest, q)) for q in (5, 25, 50, 75, 95)}
    return out


def bench_judge_overhead(tmp: Path, quick: bool, base_url: str) -> dict:
    """The judge runner's own time per pair against the chat server at ``base_url`` (it sleeps
    :data:`SERVER_DELAY_S` a request): wall time minus what the sleeps alone need at :data:`CONCURRENCY`, per pair
    and per call, at 1 and 5 passages a call; and a fully cached rerun."""
    results = {}
    n_queries = JUDGE_QUERIES // (4 if quick else 1)
    for per_call in (1, 5):
        pairs = [JudgePair(f"q{per_call}-{i}", f"第{i}个问题（{per_call}）：胃痛反酸怎么办", f"d{k}",
                           f"第{k}段：胃痛反酸可以服用质子泵抑制剂，注意饮食规律") for i in range(n_queries)
                 for k in range(JUDGE_DOCS)]
        judge = OpenAIChatJudge(JudgeConfig(id=f"bench-{per_call}", base_url=base_url, model="m",
                                            passages_per_call=per_call, max_concurrency=CONCURRENCY, timeout_s=60))
        judge_pairs(judge, pairs[:CONCURRENCY], None, show_progress=False)  # warm up connections
        with JudgmentCache(tmp / f"judge_{per_call}.sqlite") as cache:
            start = time.perf_counter()
            run = judge_pairs(judge, pairs, cache, show_progress=False)
            elapsed = time.perf_counter() - start
            start = time.perf_counter()
            cached = judge_pairs(judge, pairs, cache, show_progress=False)
            cached_elapsed = time.perf_counter() - start
        calls = run.usage.calls
        ideal = math.ceil(calls / CONCURRENCY) * SERVER_DELAY_S
        results[f"passages_per_call_{per_call}"] = {
            "pairs": len(pairs), "calls": calls, "concurrency": CONCURRENCY, "server_delay_s": SERVER_DELAY_S,
            "wall_s": elapsed, "server_only_s": ideal,
            "overhead_ms_per_pair": 1000 * (elapsed - ideal) / len(pairs),
            "overhead_ms_per_call": 1000 * (elapsed - ideal) / calls,
            "pairs_per_s": len(pairs) / elapsed, "cached_rerun_s": cached_elapsed,
            "cached_pairs": cached.cached,
        }
    return results
