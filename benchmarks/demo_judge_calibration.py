"""How good is ``care demo``'s offline judge? Precision of its positives on the demo's raw questions.

The demo generator knows which (condition, aspect) cell every raw question and every training answer
belongs to, so a judged positive can be checked: it is right when the answer is of the question's
cell. For each encoder (e5 and the hashing fallback) this script retrieves each raw question's
top-``depth`` training answers, applies the judge thresholds of ``care.pipeline.config`` (and a
sweep of the A threshold), and reports precision of the positives (grade >= A), rows with a
positive, negatives (grade < C) and false negatives among them (same-cell answers graded < C), plus
the nearest-neighbour similarity quantiles that set the diversify thresholds.

Usage::

    python -m benchmarks.demo_judge_calibration [--skip-e5]

Writes ``benchmarks/results/demo_judge/calibration.json``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from benchmarks._common import RESULTS
from benchmarks.bench_results import save
from care.demo.build import build_demo
from care.encoders.hashing import HashingCharEncoder
from care.pipeline.config import E5_JUDGE_THRESHOLDS, HASHING_JUDGE_THRESHOLDS

DEPTH = 50
QUANTILES = (5, 50, 95)
A_SWEEP = {"e5": (0.90, 0.92, 0.93, 0.935, 0.94), "hashing": (0.35, 0.40, 0.45, 0.50, 0.55)}


def second_neighbour(x: np.ndarray) -> np.ndarray:
    """Similarity of each row's 2nd nearest other row (the diversify rule drops a text when > 1 neighbour passes t)."""
    sims = x @ x.T
    np.fill_diagonal(sims, -1.0)
    return np.sort(sims, axis=1)[:, -2]


def judge_quality(sims: np.ndarray, same_cell: np.ndarray, a: float, c: float, depth: int) -> dict[str, float | int]:
    top = np.argsort(-sims, axis=1)[:, :depth]
    s = np.take_along_axis(sims, top, 1)
    rel = np.take_along_axis(same_cell, top, 1)
    pos, neg = s >= a, s < c
    return {"A": a, "C": c, "positives": int(pos.sum()), "precision": round(float((pos & rel).sum() / max(pos.sum(), 1)), 3),
            "rows_with_positive": int(pos.any(1).sum()), "negatives": int(neg.sum()), "false_negatives": int((neg & rel).sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-e5", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    bundle = build_demo()
    per_cell = len(bundle.raw_queries) // len(bundle.cells)
    if per_cell * len(bundle.cells) != len(bundle.raw_queries):
        raise SystemExit("raw questions are not one block per cell; cannot recover their cells")
    query_cells = np.array([c.key for c in bundle.cells for _ in range(per_cell)])
    questions = [r["text"] for r in bundle.raw_queries]
    answers = list(dict.fromkeys(d.text for d in bundle.train_documents))
    answer_cells = np.array([next(d.cell.key for d in bundle.train_documents if d.text == t) for t in answers])
    same_cell = query_cells[:, None] == answer_cells[None, :]
    encoders = {"hashing": (HashingCharEncoder(), HASHING_JUDGE_THRESHOLDS)}
    if not args.skip_e5:
        from care.encoders.registry import load_model

        encoders["e5"] = (load_model("e5"), E5_JUDGE_THRESHOLDS)
    out: dict[str, object] = {"questions": len(questions), "answers": len(answers), "depth": DEPTH}
    for name, (encoder, thresholds) in encoders.items():
        q = encoder.encode_queries(questions, batch_size=64)
        d = encoder.encode_documents(answers, batch_size=64)
        sims = q @ d.T
        out[name] = {
            "thresholds": thresholds,
            "configured": judge_quality(sims, same_cell, thresholds["A"], thresholds["C"], DEPTH),
            "sweep_A": [judge_quality(sims, same_cell, a, thresholds["C"], DEPTH) for a in A_SWEEP[name]],
            "best_answer_similarity_quantiles": dict(zip(map(str, QUANTILES), np.percentile(sims.max(1), QUANTILES).round(3).tolist())),
            "question_2nd_neighbour_quantiles": dict(zip(map(str, QUANTILES), np.percentile(second_neighbour(q), QUANTILES).round(3).tolist())),
            "answer_2nd_neighbour_quantiles": dict(zip(map(str, QUANTILES), np.percentile(second_neighbour(d), QUANTILES).round(3).tolist())),
        }
        logging.info("%s: %s", name, out[name]["configured"])
    path = save("demo_judge", "calibration", config={"depth": DEPTH, "encoders": list(encoders)},
                scores={name: out[name] for name in encoders},
                extra={k: v for k, v in out.items() if k not in encoders}, results=args.out)
    print(path)  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
