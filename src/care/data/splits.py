"""Hold out part of a training file as a validation retrieval task, without leaking answers.

Recipe settings must be chosen on data that is neither trained on nor the test split. Consultation
data has many queries per answer and near-duplicate answers, so holding out random *rows* would leave
a held-out query's answer among the training positives; :func:`hold_out_by_positive` holds out whole
answer groups instead (every row whose positive is a held-out answer), as the dev set's own train /
test split does; :func:`hold_out_components` holds out whole connected components of the query–positive
graph (search logs repeat queries and titles), the recipes' safety net (:mod:`care.train.recipes.validation`).
:func:`write_validation_task` turns the held-out rows into a BEIR-style task folder searched against the
corpus.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def write_validation_task(held: Sequence[dict[str, Any]], corpus_file: str | Path, folder: str | Path, *,
                          add_missing: bool = False, max_documents: int | None = None, seed: int = 0) -> Path:
    """A retrieval task folder (``queries.jsonl``, ``qrels.tsv``, ``corpus.jsonl``) whose queries are the
    held-out rows and whose relevant documents are every positive of each row, searched against the corpus.

    Args:
        held: held-out training rows (``{"query", "pos": [...]}``; ``positive`` as a text is accepted).
        corpus_file: the corpus the queries are searched against (a positive matches a document by its
            full text, title + text as encoders see them, or by its text).
        folder: where to write the task.
        add_missing: positives that are not in the corpus are added to the task's corpus (ids
            ``heldout-N``) instead of being refused.
        max_documents: at most this many documents: every positive, then a seeded sample of the rest.
            ``None``: the whole corpus. When nothing is added or dropped the task's ``corpus.jsonl`` is a
            link to ``corpus_file``, so embeddings cached for the corpus serve the task too.
        seed: seed of the distractor sample.
    Raises:
        CareError: a held-out positive is not in the corpus and ``add_missing`` is off.
    """
    from care.data.retrieval import Document, iter_documents, write_retrieval_folder

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    documents = list(iter_documents(corpus_file))
    doc_id: dict[str, str] = {}
    for doc in documents:  # a positive names a document by its full text (title + text) or its text
        doc_id.setdefault(doc.full_text, doc.id)
        doc_id.setdefault(doc.text, doc.id)
    positives = [list(dict.fromkeys(_positives(r))) for r in held]
    missing = list(dict.fromkeys(p for row in positives for p in row if p not in doc_id))
    if missing and not add_missing:
        raise CareError(f"{len(missing)} held-out positive(s) are not in {corpus_file} (first: {missing[0][:60]!r}); "
                        "the validation task needs every positive in the corpus")
    extra = [Document(f"heldout-{i}", text) for i, text in enumerate(missing)]
    doc_id.update({d.text: d.id for d in extra})
    queries = {f"v{i:05d}": r["query"] for i, r in enumerate(held)}
    qrels = {qid: {doc_id[p]: 1 for p in row} for qid, row in zip(queries, positives)}
    relevant = {did for row in qrels.values() for did in row}
    kept = documents
    if max_documents is not None and len(documents) + len(extra) > max_documents:
        rest = [d for d in documents if d.id not in relevant]
        room = max(max_documents - len(relevant), 0)
        sampled = {d.id for d in random.Random(seed).sample(rest, min(room, len(rest)))}
        kept = [d for d in documents if d.id in relevant or d.id in sampled]
    link = folder / "corpus.jsonl"
    if link.is_symlink() or link.exists():
        link.unlink()
    if not extra and len(kept) == len(documents):
        write_retrieval_folder(folder, [], queries, qrels, write_corpus=False)
        os.symlink(Path(corpus_file).resolve(), link)
    else:
        write_retrieval_folder(folder, [*kept, *extra], queries, qrels)
    return folder


def _positives(row: dict[str, Any]) -> list[str]:
    """Every positive of a row, read as :mod:`care.data.training` reads it (``pos`` or ``positive``, a text or a list)."""
    return read_positives(row, ROWS_SOURCE, None)


def hold_out_components(pairs: Sequence[tuple[str, Sequence[str]]], share: float, seed: int) -> set[int]:
    """Indices of the rows to hold out: whole connected components of the query–positive graph until
    ``share`` of the rows.

    Two rows fall in one component when they share a query text or any positive text (search logs repeat
    a query with several titles, and near-identical queries share titles), so no held-out query or
    answer is seen in training. This is stricter than :func:`hold_out_by_positive`, which groups by the
    first positive only.

    Args:
        pairs: ``(query, positives)`` per training row, in file order.
        share: fraction of the rows to hold out, in (0, 1).
        seed: seed of the component shuffle (the same seed always gives the same split).
    Returns:
        The held-out row indices (empty when ``pairs`` is).
    """
    if not 0 < share < 1:
        raise CareError(f"validation share must be in (0, 1), got {share}")
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for query, positives in pairs:
        q = root("q\x00" + query)
        for positive in positives:
            parent[root("d\x00" + positive)] = q
            q = root(q)
    components: dict[str, list[int]] = {}
    for i, (query, _) in enumerate(pairs):
        components.setdefault(root("q\x00" + query), []).append(i)
    keys = sorted(components, key=lambda k: components[k][0])  # file order, then a seeded shuffle
    random.Random(seed).shuffle(keys)
    held: set[int] = set()
    for key in keys:
        if len(held) >= share * len(pairs):
            break
        held.update(components[key])
    return held
