"""Every text of a data file of any CARE format, each row read by its own format's parser.

Vocabularies are built from whatever files a user has at hand (``care model init-tiny --texts``,
``care model export-e5 / shrink-e5 --vocab-from``, the tiny towers of ``care run``): a corpus, a
queries file, a training file, a rerank or STS file, a raw-text file, or a plain ``.txt``. A JSONL
row is recognised by its keys and parsed by the reader of that format (so ``_id``, title-only
documents and ``"pos": "one answer"`` read here exactly as everywhere else):

- ``sentence1``: STS (:func:`~care.data.sts.parse_sts_row`): both sentences;
- ``query`` and ``negative``: rerank (:func:`~care.data.rerank.parse_rerank_row`): query and candidates;
- ``query``: training (:func:`~care.data.training.parse_training_row`): prompt, query, positives, negatives;
- ``id`` or ``_id``: corpus or queries (:func:`~care.data.retrieval.parse_document`): ``full_text``;
- ``text`` alone: raw texts (``care run``'s ``raw_queries``): the text.

Any other file is plain text: one text per non-blank line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import require_text
from care.data.io import iter_jsonl, iter_text_lines
from care.data.rerank import parse_rerank_row
from care.data.retrieval import BEIR_ID, parse_document
from care.data.sts import parse_sts_row
from care.data.text_rules import has_visible
from care.data.training import parse_training_row

#: File endings read as JSONL (one object a line); anything else is one text a line.
JSONL_SUFFIXES = (".jsonl", ".json")
#: The key a raw-text row has when it is nothing else.
RAW_TEXT = "text"


def row_texts(obj: dict[str, Any], path: Path, line: int) -> list[str]:
    """The texts of one JSONL row, read by the parser of the format its keys name (module docstring).

    Raises:
        DataFormatError: the row is bad for its format, or has the keys of none — naming the file and line.
    """
    if "sentence1" in obj:
        pair = parse_sts_row(obj, path, line)
        return [pair.sentence1, pair.sentence2]
    if "query" in obj and "negative" in obj:
        example = parse_rerank_row(obj, path, line)
        return [example.query, *example.positive, *example.negative]
    if "query" in obj:
        row = parse_training_row(obj, path, line)[0]
        return [*([row.prompt] if row.prompt else []), row.query, *row.pos, *row.neg]
    if "id" in obj or BEIR_ID in obj:
        return [parse_document(obj, path, line).full_text]
    if RAW_TEXT not in obj:
        raise DataFormatError(path, f"a row of no known format (keys {sorted(obj)[:6]})", line=line,
                              hint='give a corpus/queries row {"id", "text"}, a training row {"query", "pos"}, '
                                   'a rerank row {"query", "positive", "negative"}, an STS row '
                                   '{"sentence1", "sentence2", "score"} or a raw text {"text"}')
    return [require_text(obj, RAW_TEXT, path, line)]


def iter_file_texts(path: str | Path) -> Iterator[str]:
    """Stream the texts of one file: a JSONL file of any CARE format (row by row), else one text a line.

    Raises:
        DataFormatError: a missing or unreadable file, or a bad row (named by line and field).
    """
    path = Path(path)
    if path.suffix.lower() not in JSONL_SUFFIXES:
        yield from (line for _, line in iter_text_lines(path) if has_visible(line))
        return
    for line, obj in iter_jsonl(path):
        yield from row_texts(obj, path, line)


def texts_of_files(paths: Iterable[str | Path]) -> list[str]:
    """Every text of every file in ``paths``, in file and row order (:func:`iter_file_texts`)."""
    return [text for path in paths for text in iter_file_texts(path)]
