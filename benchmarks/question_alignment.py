"""CARE [rich + questions]'s Stage I data: CARE [rich]'s rows, then one row per unlabelled question.

    python -m benchmarks.question_alignment RICH_FILE OUT [--queries FILE ...] [--train-queries FILE ...]

Stage I needs only texts, so questions nobody labelled (a search log; here the second dev set's) can teach the
query tower. ``OUT`` holds every row of ``RICH_FILE`` (``benchmarks.frontier_kit.write_rich_alignment``), then a
``query_align`` row with one BM25 negative for each question not already in it, the negatives mined among the
questions (``care.train.recipes.alignment_data.build_alignment_data``, seed 0). The CPU's Stage I probes
(``stage1_probe_test_L1_more_text_seed0``) trained on the file this writes from
``--queries ../shared/data/kuake_qtr_search/corpus.jsonl --train-queries ../shared/data/kuake_qtr_search/train.jsonl``;
``care run`` does the same from ``inputs.alignment_queries`` (mining every query-side text together).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from care.data.io import iter_jsonl, write_jsonl
from care.data.training import iter_training_file
from care.train.recipes import alignment_data
from care.train.recipes.alignment_data import build_alignment_data


def question_texts(files: Sequence[Path], training_files: Sequence[Path] = ()) -> list[str]:
    """The texts of unlabelled question files (queries files, or a BEIR corpus of questions: its ``text``s;
    :func:`care.train.recipes.alignment_data.question_texts`), then the queries of training files (their labels unused)."""
    return ([*alignment_data.question_texts(files)]
            + [example.query for path in training_files for example in iter_training_file(path)])


def write_question_alignment(rich_file: Path, questions: Sequence[str], out: Path) -> dict[str, int]:
    """Write ``rich_file``'s rows, then the rows of the ``questions`` it does not hold, to ``out``; returns counts."""
    rich = [row for _, row in iter_jsonl(rich_file)]
    held = {row["query"] for row in rich}
    new = [text for text in questions if text not in held]
    rows = list(build_alignment_data(new, [], seed=0))
    write_jsonl(out, [*rich, *rows])
    return {"rich_rows": len(rich), "questions": len(questions), "question_rows": len(rows)}


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
