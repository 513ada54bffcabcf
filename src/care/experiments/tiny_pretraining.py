"""Pretraining the tiny BERT query tower on the dev set's texts: RetroMAE, contrastive, and both in order
(``benchmarks/pretrain_tiny.py``).

The start is the tiny BERT of ``benchmarks/bench_care.py`` (``make_tiny_models(corpus texts + train queries, seed)``),
so a checkpoint written here can replace ``init_query``'s query model in the Table-12 ablation. :func:`prepare` writes
the base tower, ``texts.txt`` (every corpus answer and TRAIN query) and ``pairs.jsonl`` (each answer split into
first sentence and rest, :func:`care.pretrain.pairs.make_pairs`); :func:`pretrain_runs` trains the three runs
(resumable); :func:`anisotropy` (mean pairwise cosine of the CLS embeddings: 1.0 = collapsed) and :func:`probe`
(zero-shot nDCG@10 of each tower alone on the test queries against the full corpus) are the diagnostics;
:func:`summary` gathers them for the record.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from care.bench.locations import CONFIGS, dev_set
from care.config import Override

#: The pretraining recipes (``retromae_tiny.yaml``, ``contrastive_tiny.yaml``).
PRETRAIN_CONFIGS = CONFIGS / "pretrain"
#: Tokens per text (the init_query length of configs/care_tiny; the dev set's answers average ~155 characters).
MAX_SEQ_LENGTH = 128
#: Texts sampled for the anisotropy diagnostic.
ANISOTROPY_TEXTS = 200
#: Where the runs log (the tracker of the engine's loop).
LOG_WITH = "tensorboard"

logger = logging.getLogger(__name__)


def prepare(work: Path, seed: int) -> dict[str, Path]:
    """Base tiny BERT, texts.txt and pairs.jsonl (each written once)."""
    from care.data.io import atomic_write, iter_jsonl
    from care.data.retrieval import load_corpus
    from care.models.presets import make_tiny_models
    from care.pretrain.pairs import make_pairs

    toyhom = dev_set()
    corpus = [d.text for d in load_corpus(toyhom / "corpus.jsonl").values()]
    queries = [obj["query"] for _, obj in iter_jsonl(toyhom / "train.jsonl")]
    base = work / "base"
    if not (base / "tiny-bert").is_dir():
        make_tiny_models(corpus + queries, base, seed=seed)  # same call as bench_care.py
    texts = work / "texts.txt"
    if not texts.is_file():
        with atomic_write(texts) as fh:
            for text in corpus + queries:
                fh.write(" ".join(text.split()) + "\n")
    pairs = work / "pairs.jsonl"
    if not pairs.is_file():
        stats = make_pairs([toyhom / "corpus.jsonl"], pairs, mode="split")
        logger.info("pairs: %s", stats)
    return {"base": base / "tiny-bert", "texts": texts, "pairs": pairs}


def run(name: str, config_file: str, overrides: Sequence[Override]) -> dict:
    """Pretrain with ``config_file`` and ``overrides`` (resumable; wall time summed over resumed sessions); returns the
    run's model, steps, final loss, wall seconds, config and loss curve."""
    from care.pretrain.config import load_pretrain_config
    from care.pretrain.trainer import pretrain, read_pretrain_result

    config = load_pretrain_config(PRETRAIN_CONFIGS / config_file, overrides)
    out = Path(config.output_dir)
    timing_file = out / "wall_seconds.json"
    if read_pretrain_result(out) is None:
        t0 = time.perf_counter()
        pretrain(config, resume=True)
        elapsed = time.perf_counter() - t0
        previous = json.loads(timing_file.read_text())["seconds"] if timing_file.is_file() else 0.0
        timing_file.write_text(json.dumps({"seconds": previous + elapsed}))
    result = read_pretrain_result(out)
    curve = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {"name": name, "model": result.model, "steps": result.global_step, "records_seen": result.records_seen,
            "final_loss": result.final_loss, "extra": result.extra,
            "wall_seconds": json.loads(timing_file.read_text())["seconds"] if timing_file.is_file() else None,
            "config": config.to_dict(), "loss_curve": curve}


def probe(models: dict[str, Path]) -> dict[str, dict[str, float]]:
    """Zero-shot retrieval of each tower alone on the toyhom test split (CLS pooling, no instruction)."""
    from care.bench.options import RunOptions
    from care.bench.registry import infer_task
    from care.bench.runner import evaluate
    from care.bench.task import TaskMetadata
    from care.encoders.registry import load_model

    toyhom = dev_set()
    task = TaskMetadata.from_dict({**infer_task(toyhom).to_dict(), "name": "toyhom-test", "split": "test",
                                   "path": str(toyhom), "instruction": None})
    out = {}
    for label, folder in models.items():
        result = evaluate(load_model(f"{folder}?pooling=cls&max_length={MAX_SEQ_LENGTH}"), task,
                          RunOptions(show_progress=False), label=label)
        out[label] = {k: result.scores[k] for k in ("ndcg_at_10", "recall_at_100") if k in result.scores}
        logger.info("probe %s: %s", label, out[label])
    return out


def anisotropy(models: dict[str, Path], texts_file: Path, n: int = ANISOTROPY_TEXTS) -> dict[str, float]:
    """Mean pairwise cosine of the towers' CLS embeddings over ``n`` texts (1.0 = collapsed space)."""
    import torch

    from care.models.query import build_query_encoder

    with open(texts_file, encoding="utf-8") as fh:
        texts = [line.strip() for line in fh]
    sample = texts[:: max(1, len(texts) // n)][:n]
    out = {}
    for label, folder in models.items():
        vectors = torch.as_tensor(build_query_encoder(folder, max_seq_length=MAX_SEQ_LENGTH).encode(sample))
        sims = vectors @ vectors.T
        out[label] = float(sims[~torch.eye(len(sample), dtype=torch.bool)].mean())
    return out


def pretrain_runs(work: Path, paths: dict[str, Path], seed: int, retromae_steps: int, contrastive_steps: int,
                  log_with: str = LOG_WITH) -> dict[str, dict]:
    """The three runs under ``work``: RetroMAE and contrastive from the random tiny BERT, then contrastive from the
    RetroMAE checkpoint (the paper's order); typed settings over the tiny pretraining configs."""
    common: list[Override] = [("seed", seed), ("model.max_seq_length", MAX_SEQ_LENGTH),
                              ("runtime.progress_bar", False), ("runtime.log_with", log_with)]
    runs = {}
    runs["retromae"] = run("retromae", "retromae_tiny.yaml", [
        *common, ("output_dir", str(work / "retromae")), ("model.name_or_path", str(paths["base"])),
        ("data.train_files", [str(paths["texts"])]), ("optim.max_steps", retromae_steps)])
    contrastive: list[Override] = [*common, ("data.train_files", [str(paths["pairs"])]),
                                   ("optim.max_steps", contrastive_steps)]
    runs["contrastive"] = run("contrastive", "contrastive_tiny.yaml", [
        *contrastive, ("output_dir", str(work / "contrastive")), ("model.name_or_path", str(paths["base"]))])
    runs["retromae_contrastive"] = run("retromae_contrastive", "contrastive_tiny.yaml", [
        *contrastive, ("output_dir", str(work / "retromae_contrastive")),
        ("model.name_or_path", str(runs["retromae"]["model"]))])
    return runs


def summary(work: Path, paths: dict[str, Path], seed: int, threads: int, runs: dict[str, dict],
            probed: bool) -> dict[str, Any]:
    """The runs with their settings, data sizes, machine, the anisotropy of every tower and (``probed``) the
    zero-shot probe."""
    out: dict[str, Any] = {
        "dataset": "toyhom_neike_sample", "seed": seed, "work": str(work), "base_model": str(paths["base"]),
        "data": {"texts": sum(1 for _ in open(paths["texts"], encoding="utf-8")),
                 "pairs": sum(1 for _ in open(paths["pairs"], encoding="utf-8"))},
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch_threads": threads},
        "runs": runs,
    }
    towers = {"random init": paths["base"], **{name: Path(r["model"]) for name, r in runs.items()}}
    out["mean_pairwise_cosine"] = anisotropy(towers, paths["texts"])
    if probed:
        out["zero_shot_probe"] = probe(towers)
    return out
