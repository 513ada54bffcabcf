"""CARE [rich + questions]'s Stage I data: CARE [rich]'s rows, then one row per unlabelled question.

Stage I needs only texts, so questions nobody labelled (a search log; a second dev set's) can teach the query tower.
:func:`write_question_alignment` writes every row of a rich alignment file, then a ``query_align`` row with one BM25
negative for each question not already in it, the negatives mined among the questions
(:func:`care.train.recipes.alignment_data.build_alignment_data`, seed 0); :func:`question_texts` gathers the questions
from question files and from training files' queries (their labels unused). ``care run`` does the same from
``inputs.alignment_queries`` (mining every query-side text together); ``python -m benchmarks.question_alignment`` is
the command line of these two functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from care.data.io import iter_jsonl, write_jsonl
from care.data.training import iter_training_file
from care.train.recipes import alignment_data
from care.train.recipes.alignment_data import build_alignment_data

#: Seed of the negatives mined among the questions.
QUESTION_SEED = 0


def question_texts(files: Sequence[Path], training_files: Sequence[Path] = ()) -> list[str]:
    """The texts of unlabelled question files (queries files, or a BEIR corpus of questions: its ``text``s;
    :func:`care.train.recipes.alignment_data.question_texts`), then the queries of training files (labels unused).

    Raises:
        DataFormatError: a question without text, naming the file, line and field.
    """
    return ([*alignment_data.question_texts(files)]
            + [example.query for path in training_files for example in iter_training_file(path)])


def write_question_alignment(rich_file: Path, questions: Sequence[str], out: Path) -> dict[str, int]:
    """Write ``rich_file``'s rows, then the rows of the ``questions`` it does not hold, to ``out`` (atomically).

    Returns:
        ``{"rich_rows", "questions", "question_rows"}``: the counts written.
    """
    rich = [row for _, row in iter_jsonl(rich_file)]
    held = {row["query"] for row in rich}
    new = [text for text in questions if text not in held]
    rows = list(build_alignment_data(new, [], seed=QUESTION_SEED))
    write_jsonl(out, [*rich, *rows])
    return {"rich_rows": len(rich), "questions": len(questions), "question_rows": len(rows)}
