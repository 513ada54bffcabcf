"""CARE [rich + questions]'s Stage I data: CARE [rich]'s rows, then one row per unlabelled question.

    python -m benchmarks.question_alignment RICH_FILE OUT [--queries FILE ...] [--train-queries FILE ...]

Stage I needs only texts, so questions nobody labelled (a search log; here the second dev set's) can teach the
query tower. ``OUT`` holds every row of ``RICH_FILE`` (``benchmarks.frontier_kit.write_rich_alignment``), then a
``query_align`` row with one BM25 negative for each question not already in it: the package's
:mod:`care.train.recipes.question_alignment`. The CPU's Stage I probes (``stage1_probe_test_L1_more_text_seed0``)
trained on the file this writes from ``--queries ../shared/data/kuake_qtr_search/corpus.jsonl --train-queries
../shared/data/kuake_qtr_search/train.jsonl``; ``care run`` does the same from ``inputs.alignment_queries``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from care.train.recipes.question_alignment import question_texts, write_question_alignment

__all__ = ["main", "question_texts", "write_question_alignment"]  # frontier_kit uses both


def main() -> None:
    """Write the file the command line names."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rich_file", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--queries", type=Path, nargs="*", default=[], help="question files ({id or _id, text} JSONL)")
    p.add_argument("--train-queries", type=Path, nargs="*", default=[],
                   help="training files whose queries (labels unused) are questions too")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if not (a.queries or a.train_queries):
        p.error("give question files: --queries and / or --train-queries")
    print(json.dumps(write_question_alignment(a.rich_file, question_texts(a.queries, a.train_queries), a.out)))  # noqa: T201


if __name__ == "__main__":
    main()
