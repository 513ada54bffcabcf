"""Where an e5 student starts: e5's own query vectors vs the same queries embedded as passages, and
untrained 6-layer cuts of e5 (first six layers vs strided 0, 2, ..., 10) against e5's documents.

These are the numbers behind two choices of the student recipe (``configs/student/e5.yaml``): Stage I targets the teacher's
*query* vectors (``model.teacher.query_side_as_queries``), and the student is cut with
``care model prune --keep strided``. Evaluated on the dev set's test split over the full corpus
(nDCG@10), so it chooses on test: it refuses unless given ``--select-on-test``, and its record marks the choice
(the selection protocol, :mod:`care.bench.selection`; pending re-selection on validation). Writes
``benchmarks/results/e5_student_starts/toyhom.json`` and ``.md``.

Usage::

    python -m benchmarks.e5_student_starts --select-on-test
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from benchmarks._common import RESULTS, RUNS, add_allow_dirty, pin_code
from benchmarks.bench_datasets import e5_cut, prepare_toyhom
from benchmarks.bench_results import save
from care.bench.options import RunOptions
from care.bench.runner import evaluate
from care.bench.selection import SELECT_ON_TEST_FLAG, TEST, TEST_FOOTNOTE, Selection, add_selections, selection_split
from care.encoders.cache import EmbeddingCache
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model

logger = logging.getLogger("e5_student_starts")

#: The cut compared (half of e5's 12 layers).
LAYERS = 6


class QueriesAsPassages:
    """An encoder view of e5 that embeds queries exactly as it embeds passages (``passage: `` prefix)."""

    def __init__(self, e5) -> None:
        self.e5 = e5
        self.name = f"{e5.name} (queries as passages)"
        self.fingerprint = f"{e5.fingerprint}+queries-as-passages"
        self.dim = e5.dim

    def encode_queries(self, texts: Sequence[str], *, instruction: str | None = None, batch_size: int | None = None,
                       show_progress: bool = False) -> np.ndarray:
        return self.e5.encode_documents(texts, batch_size=batch_size, show_progress=show_progress)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        return self.e5.encode_documents(texts, batch_size=batch_size, show_progress=show_progress)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(SELECT_ON_TEST_FLAG, action="store_true",
                        help="required: the starts are scored on the test split (the record is then marked)")
    args = add_allow_dirty(parser).parse_args()
    split = selection_split(TEST, select_on_test=args.select_on_test, where="e5_student_starts")
    pin_code(RESULTS, args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    src = RUNS / "bench_care" / "toyhom"
    ds = prepare_toyhom(src)
    cache = EmbeddingCache(src / "embedding_cache")
    e5 = load_model("e5")
    plain = dataclasses.replace(ds.task, instruction=None)  # the cuts take e5's own prefix, like e5
    prefix = "&query_prefix=query%3A%20"
    models = {"e5 query vectors (its own convention)": e5,
              # documents through e5 itself, so its cached corpus vectors are reused
              "e5 with the queries embedded as passages": AsymmetricEncoder(QueriesAsPassages(e5), e5),
              f"e5 first {LAYERS} layers, untrained": load_model(f"asym:{e5_cut(LAYERS, 'first')}?pooling=mean{prefix}|e5"),
              f"e5 {LAYERS} strided layers (0, 2, ...), untrained":
                  load_model(f"asym:{e5_cut(LAYERS, 'strided')}?pooling=mean{prefix}|e5")}
    scores = {}
    for name, model in models.items():
        result = evaluate(model, plain, RunOptions(cache=cache, show_progress=False), label=name)
        scores[name] = result.scores["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", name, scores[name])
    lines = ["# Where an e5 student starts (toyhom test, documents: e5 passages)", "",
             "| query side | nDCG@10 |", "|---|---|", *(f"| {k} | {v:.4f} |" for k, v in scores.items()), "",
             "Command: `python -m benchmarks.e5_student_starts`"]
    cuts = {k: round(v, 4) for k, v in scores.items() if "untrained" in k}  # the starts the student chooses among
    choice = Selection("the e5 student's starting layers", split, max(cuts, key=lambda k: cuts[k]), cuts,
                       metric="ndcg_at_10", rows=list(cuts), note="scored on toyhom's test split")
    save("e5_student_starts", "toyhom", config={"dataset": "toyhom", "split": split, "layers": LAYERS},
         scores={k: {"ndcg_at_10": v} for k, v in scores.items()}, markdown="\n".join([*lines, "", TEST_FOOTNOTE]),
         extra=add_selections({}, [choice]))
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
