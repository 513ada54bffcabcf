"""Hold out part of a training file as a validation retrieval task, without leaking answers.

Recipe settings must be chosen on data that is neither trained on nor the test split. Consultation
data has many queries per answer and near-duplicate answers, so holding out random *rows* would leave
a held-out query's answer among the training positives; :func:`hold_out_by_positive` holds out whole
answer groups instead (every row whose positive is a held-out answer), as the dev set's own train /
test split does. :func:`write_validation_task` turns the held-out rows into a BEIR-style task folder
searched against the full corpus.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from care.data.io import atomic_write, write_jsonl
from care.data.training import read_positives
from care.errors import CareError


#: What errors name as the source of rows held in memory.
ROWS_SOURCE = "training rows"


def positive_of(row: dict[str, Any]) -> str:
    """The (first) positive of a training row, read as :mod:`care.data.training` reads it (``pos`` or
    ``positive``, a text or a list of texts).

    Raises:
        DataFormatError: the row has no positive (or a bad one).
    """
    return read_positives(row, ROWS_SOURCE, None)[0]


def hold_out_by_positive(rows: Sequence[dict[str, Any]], share: float, seed: int
                         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split ``rows`` into (kept, held out), holding out whole answer groups until ``share`` of the rows.

    Args:
        rows: training rows (see :func:`positive_of`).
        share: fraction of rows to hold out, in (0, 1).
        seed: seed of the group shuffle (the same seed always gives the same split).
    """
    if not 0 < share < 1:
        raise CareError(f"validation share must be in (0, 1), got {share}")
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(positive_of(row), []).append(i)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    held: set[int] = set()
    for key in keys:
        if len(held) >= share * len(rows):
            break
        held.update(groups[key])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def write_validation_task(held: Sequence[dict[str, Any]], corpus_file: str | Path, folder: str | Path) -> Path:
    """A retrieval task folder (``queries.jsonl``, ``qrels.tsv``, ``corpus.jsonl`` linked to ``corpus_file``)
    whose queries are the held-out rows and whose relevant documents are their positives in the corpus.

    A positive matches a document by its ``full_text`` (title + text) or its text.

    Raises:
        CareError: a held-out positive is not in the corpus (the task could not be scored).
    """
    from care.data.retrieval import load_corpus

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus(corpus_file)
    doc_id = {**{doc.text: i for i, doc in corpus.items()}, **{doc.full_text: i for i, doc in corpus.items()}}
    missing = [positive_of(r) for r in held if positive_of(r) not in doc_id]
    if missing:
        raise CareError(f"{len(missing)} held-out positive(s) are not in {corpus_file} (first: {missing[0][:60]!r}); "
                        "the validation task needs every positive in the corpus")
    write_jsonl(folder / "queries.jsonl", [{"id": f"v{i:05d}", "text": r["query"]} for i, r in enumerate(held)])
    with atomic_write(folder / "qrels.tsv") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        fh.writelines(f"v{i:05d}\t{doc_id[positive_of(r)]}\t1\n" for i, r in enumerate(held))
    link = folder / "corpus.jsonl"
    if not link.exists():
        os.symlink(Path(corpus_file).resolve(), link)
    return folder
