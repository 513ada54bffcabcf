"""The benchmark's rule for query-side texts, applied by every runner before any encoding.

A query (a retrieval or rerank query, an STS sentence) that no model can take — nothing visible
(only whitespace, zero-width or control characters), a NUL, a lone surrogate; the rule is
:func:`care.data.text_rules.text_problem`, the one the service applies at its edge — is **refused**:
a warning names the task, the query id and the reason; the result lists it in ``refused_queries``
(``{id: reason}``); it is left out of the metric (neither a hit nor a zero). A task whose every
query is refused is an error.

Every other query is scored, however odd (stopwords only, symbols, emoji, Latin, traditional
characters): the lexical path tokenises it (:mod:`care.encoders.bm25`), a dense model encodes it.
A query longer than the dense model reads in one pass is scored too; :func:`report_long_queries`
logs how many there are and what the model does with them (an HF model truncates, e5 reads windows).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from care.data.text_rules import text_problem
from care.encoders.base import Encoder, long_queries
from care.errors import CareError

logger = logging.getLogger(__name__)


def check_queries(queries: Mapping[str, str], task_name: str) -> dict[str, str]:
    """``{id: reason}`` of the ``queries`` refused by the rule above, each logged as a warning.

    Raises:
        CareError: every query is refused (the task has nothing to score).
    """
    refused: dict[str, str] = {}
    for query_id, text in queries.items():
        problem = text_problem(text)
        if problem is not None:
            refused[query_id] = f"query {problem}"
            logger.warning("%s: query %r refused, left out of the metric: %s", task_name, query_id, refused[query_id])
    if queries and len(refused) == len(queries):
        raise CareError(f"{task_name}: every one of its {len(queries)} queries was refused "
                        f"(first: {next(iter(refused))!r} {next(iter(refused.values()))}); fix the query texts")
    return refused


def report_long_queries(model: Encoder, texts: Sequence[str], instruction: str | None, task_name: str) -> int | None:
    """Log how many ``texts`` are longer than ``model``'s query side reads in one pass; return that
    count, or None when the model cannot tell (see :func:`care.encoders.base.long_queries`)."""
    found = long_queries(model, texts, instruction)
    if found is None:
        return None
    if found.count:
        logger.info("%s: %d of %d queries are longer than %s's %d-token limit; they are %s",
                    task_name, found.count, len(texts), model.name, found.limit, found.handling)
    return found.count
