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
``benchmarks/results/pretrain/tiny.json`` (paths, settings, wall time, loss curves, probe). The logic is
:mod:`care.experiments.tiny_pretraining`'s.

Usage::

    python -m benchmarks.pretrain_tiny [--work runs/pretrain/toyhom] [--seed 0] \
        [--retromae-steps 400] [--contrastive-steps 250]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from care.bench.locations import RUNS, dev_set, portable
from care.bench.reports.records import save
from care.experiments.tiny_pretraining import prepare, pretrain_runs, summary

logger = logging.getLogger("pretrain_tiny")


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
    runs = pretrain_runs(work, paths, args.seed, args.retromae_steps, args.contrastive_steps)
    result = summary(work, paths, args.seed, args.threads, runs, probed=not args.no_probe)
    kept = ("runs", "mean_pairwise_cosine", "zero_shot_probe")
    path = save("pretrain", "tiny", config=portable({k: v for k, v in result.items() if k not in kept}),
                seeds=[args.seed], scores=portable({k: result[k] for k in kept if k in result}))
    logger.info("wrote %s", path)
    for name, r in runs.items():
        print(f"{name}: {r['steps']} steps, {r['wall_seconds'] or 0:.0f} s, loss {r['loss_curve'][0]['loss']:.3f} -> "
              f"{r['final_loss']:.3f}, model {r['model']}")
    for name, value in result["mean_pairwise_cosine"].items():
        print(f"mean pairwise cosine {name}: {value:.4f}")
    for name, scores in result.get("zero_shot_probe", {}).items():
        print(f"probe {name}: {scores}")


if __name__ == "__main__":
    main()
