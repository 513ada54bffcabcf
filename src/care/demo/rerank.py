"""Rerank examples: a question, its answering documents, hard and easy negatives."""

from __future__ import annotations

import random
from collections.abc import Sequence

from care.data.rerank import RerankExample
from care.demo.cells import GRADE_ANSWERS, GRADE_NONE, RelevanceScheme
from care.demo.config import DemoConfig
from care.demo.corpus import DemoDocument
from care.demo.questions import DemoQuery
from care.errors import CareError


def split_negatives(
    query: DemoQuery, documents: Sequence[DemoDocument], scheme: RelevanceScheme
) -> tuple[list[DemoDocument], list[DemoDocument], list[DemoDocument]]:
    """Partition ``documents`` for ``query`` into (answers, hard negatives, easy negatives).

    Hard negatives share the condition or the aspect but are graded irrelevant; easy negatives
    share neither. Partially relevant documents (grade 1) are in none of the lists.
    """
    answers, hard, easy = [], [], []
    for doc in documents:
        grade = scheme.grade(query.cell, doc.cell)
        if grade == GRADE_ANSWERS:
            answers.append(doc)
        elif grade == GRADE_NONE:
            shares = doc.cell.condition.key == query.cell.condition.key or doc.cell.aspect.key == query.cell.aspect.key
            (hard if shares else easy).append(doc)
    return answers, hard, easy


def build_rerank(
    queries: Sequence[DemoQuery],
    documents: Sequence[DemoDocument],
    scheme: RelevanceScheme,
    rng: random.Random,
    config: DemoConfig,
) -> list[RerankExample]:
    """``config.rerank_queries`` examples (a random subset of ``queries``, kept in id order)."""
    if config.rerank_queries > len(queries):
        raise CareError(f"rerank_queries={config.rerank_queries} exceeds the {len(queries)} benchmark questions")
    chosen = sorted(rng.sample(range(len(queries)), config.rerank_queries))
    examples = []
    for index in chosen:
        query = queries[index]
        answers, hard, easy = split_negatives(query, documents, scheme)
        negatives = rng.sample(hard, config.rerank_hard_negatives) + rng.sample(easy, config.rerank_easy_negatives)
        rng.shuffle(negatives)
        examples.append(RerankExample(query.text, tuple(d.text for d in answers), tuple(d.text for d in negatives)))
    return examples
