"""Pretrain the tiny BERT query tower on the toyhom dev-set texts: RetroMAE, contrastive, and both in order.

The starting point is exactly the tiny BERT that ``benchmarks/bench_care.py`` uses as its query tower
(``make_tiny_models(corpus texts + train queries, seed)``: same tokenizer, same random weights), so a
checkpoint written here can replace ``model.query_model`` of ``init_query`` in the Table-12 ablation.

Data (nothing from the test queries or any relevance label):

* RetroMAE texts: every corpus answer plus every TRAIN query, one per line (``texts.txt``);
* contrastive pairs: the corpus has no titles, so each answer is split into (first sentence, rest)
  with :func:`care.pretrain.pairs.iter_pairs` (``pairs.jsonl``). The (title, answer) rows of
  ``train.jsonl`` are the supervised pairs of ``init_query`` and are not used here.

Runs (each resumable: rerunning skips finished runs and resumes interrupted ones from checkpoints):

* ``retromae``: RetroMAE (enhanced decoding, mask 0.3 / 0.5) from the random tiny BERT;
* ``contrastive``: in-batch InfoNCE with a learnable temperature from the random tiny BERT;
* ``retromae_contrastive``: the paper's order — contrastive starting from the RetroMAE checkpoint.

Then two diagnostics: the mean pairwise cosine of each tower's CLS embeddings (1.0 = a collapsed,
anisotropic space) and a zero-shot probe: nDCG@10 of each tower alone (CLS pooling, no instruction) on the toyhom test
queries against the full corpus, next to the random-init tower. Output:
``benchmarks/results/pretrain/tiny.json`` (paths, settings, wall time, loss curves, probe).

Usage::

    python -m benchmarks.pretrain_tiny [--work runs/pretrain/toyhom] [--seed 0] \
        [--retromae-steps 400] [--contrastive-steps 250]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time
from pathlib import Path

from benchmarks._common import ROOT, RUNS, dev_set, portable
from benchmarks.bench_results import save

CONFIGS = ROOT / "configs" / "pretrain"
#: Tokens per text (the init_query length of configs/care_tiny; the dev set's answers average ~155 characters).
MAX_SEQ_LENGTH = 128
#: Texts sampled for the anisotropy diagnostic.
ANISOTROPY_TEXTS = 200

logger = logging.getLogger("pretrain_tiny")


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


def run(name: str, config_file: str, overrides: list[str]) -> dict:
    from care.pretrain.config import load_pretrain_config
    from care.pretrain.trainer import pretrain, read_pretrain_result

    config = load_pretrain_config(CONFIGS / config_file, overrides)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=RUNS / "pretrain" / "toyhom")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--retromae-steps", type=int, default=400)
    parser.add_argument("--contrastive-steps", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-probe", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    dev_set()  # stops here, naming $CARE_DEV_SET, when it is unset
    import torch

    torch.set_num_threads(args.threads)
    work = args.work.resolve()
    paths = prepare(work, args.seed)
    common = [f"seed={args.seed}", f"model.max_seq_length={MAX_SEQ_LENGTH}", "runtime.progress_bar=false",
              "runtime.log_with=tensorboard"]
    runs = {}
    runs["retromae"] = run("retromae", "retromae_tiny.yaml", [
        *common, f"output_dir={work / 'retromae'}", f"model.name_or_path={paths['base']}",
        f"data.train_files=[{paths['texts']}]", f"optim.max_steps={args.retromae_steps}"])
    contrastive = [*common, f"data.train_files=[{paths['pairs']}]", f"optim.max_steps={args.contrastive_steps}"]
    runs["contrastive"] = run("contrastive", "contrastive_tiny.yaml", [
        *contrastive, f"output_dir={work / 'contrastive'}", f"model.name_or_path={paths['base']}"])
    runs["retromae_contrastive"] = run("retromae_contrastive", "contrastive_tiny.yaml", [
        *contrastive, f"output_dir={work / 'retromae_contrastive'}", f"model.name_or_path={runs['retromae']['model']}"])

    summary = {
        "dataset": "toyhom_neike_sample", "seed": args.seed, "work": str(work), "base_model": str(paths["base"]),
        "data": {"texts": sum(1 for _ in open(paths["texts"], encoding="utf-8")),
                 "pairs": sum(1 for _ in open(paths["pairs"], encoding="utf-8"))},
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch_threads": args.threads},
        "runs": runs,
    }
    towers = {"random init": paths["base"], **{name: Path(r["model"]) for name, r in runs.items()}}
    summary["mean_pairwise_cosine"] = anisotropy(towers, paths["texts"])
    if not args.no_probe:
        summary["zero_shot_probe"] = probe(towers)
    kept = ("runs", "mean_pairwise_cosine", "zero_shot_probe")
    path = save("pretrain", "tiny", config=portable({k: v for k, v in summary.items() if k not in kept}), seeds=[args.seed],
                scores=portable({k: summary[k] for k in kept if k in summary}))
    logger.info("wrote %s", path)
    for name, r in runs.items():
        print(f"{name}: {r['steps']} steps, {r['wall_seconds'] or 0:.0f} s, loss {r['loss_curve'][0]['loss']:.3f} -> "
              f"{r['final_loss']:.3f}, model {r['model']}")
    for name, value in summary["mean_pairwise_cosine"].items():
        print(f"mean pairwise cosine {name}: {value:.4f}")
    for name, scores in summary.get("zero_shot_probe", {}).items():
        print(f"probe {name}: {scores}")


if __name__ == "__main__":
    main()
