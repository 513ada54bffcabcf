"""Where a ``bank_distill`` stage's candidate bank comes from (``data.bank_file``).

The bank is the set of documents every training query is ranked against (see
:class:`~care.train.engine.losses.CandidateBankKLLoss`). By default it is every distinct ``pos``/``neg`` text
of the training file; ``data.bank_file`` names another source, so the training file may hold
queries only (e.g. Stage I's alignment rows) while the bank stays the real documents.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from care.data.errors import DataFormatError
from care.data.io import iter_jsonl


def example_documents(examples: Iterable) -> set[str]:
    """Every distinct ``pos`` and ``neg`` text of training examples."""
    return {t for ex in examples for t in (*ex.pos, *ex.neg)}


def bank_file_documents(path: str | Path) -> set[str]:
    """The distinct documents of ``path``: a corpus JSONL (``id``, ``text``, optional ``title``; each
    document as the harness encodes it, :attr:`~care.data.retrieval.Document.full_text`) or a training file
    (``query``, ``pos`` / ``positive``, ``neg``), told apart by the first row's keys.

    Raises:
        DataFormatError: the file is missing, has no rows, or a row is bad (named by line).
    """
    from care.data.retrieval import load_corpus
    from care.data.training import iter_training_file

    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "the candidate bank file (data.bank_file) does not exist",
                              hint="give a corpus JSONL ({\"id\", \"text\"}) or a training file, or remove data.bank_file")
    first = next(iter_jsonl(path), None)
    if first is None:
        raise DataFormatError(path, "no rows", hint="the candidate bank needs at least one document")
    if "query" in first[1]:  # a training row (``pos`` or ``positive``); corpus rows have no query
        return example_documents(iter_training_file(path))
    return {doc.full_text for doc in load_corpus(path).values()}  # title + text, as the corpus is encoded
