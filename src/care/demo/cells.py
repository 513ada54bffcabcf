"""(condition, aspect) cells, the graded relevance between them, and content validation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from care.demo.content.schema import Aspect, Condition
from care.demo.lexicon import SynonymLexicon
from care.errors import CareError

GRADE_ANSWERS = 2
"""The document answers the question (same condition and aspect)."""
GRADE_PARTIAL = 1
"""Partially relevant: same condition with a closely related aspect, or the same aspect of a
closely related condition."""
GRADE_NONE = 0


@dataclass(frozen=True)
class Cell:
    """One (condition, aspect) pair: the unit questions and answers are written for."""

    condition: Condition
    aspect: Aspect

    @property
    def key(self) -> str:
        return f"{self.condition.key}/{self.aspect.key}"

    @property
    def facts(self) -> tuple[str, ...]:
        return self.condition.facts[self.aspect.key]


class RelevanceScheme:
    """Grades a document's cell against a question's cell (2 / 1 / 0, see module constants).

    Args:
        related_aspects: unordered pairs of aspect keys that partly answer each other.
    """

    def __init__(self, related_aspects: Iterable[tuple[str, str]]) -> None:
        self._related_aspects = {frozenset(pair) for pair in related_aspects}

    def grade(self, query_cell: Cell, doc_cell: Cell) -> int:
        same_condition = query_cell.condition.key == doc_cell.condition.key
        same_aspect = query_cell.aspect.key == doc_cell.aspect.key
        if same_condition and same_aspect:
            return GRADE_ANSWERS
        if same_condition and frozenset((query_cell.aspect.key, doc_cell.aspect.key)) in self._related_aspects:
            return GRADE_PARTIAL
        if same_aspect and doc_cell.condition.key in query_cell.condition.related:
            return GRADE_PARTIAL
        return GRADE_NONE


def all_cells(conditions: Sequence[Condition], aspects: Sequence[Aspect]) -> list[Cell]:
    """Every (condition, aspect) cell, condition-major, in the given orders."""
    return [Cell(c, a) for c in conditions for a in aspects]


def validate_content(
    conditions: Sequence[Condition],
    aspects: Sequence[Aspect],
    lexicon: SynonymLexicon,
    *,
    min_facts: int,
) -> None:
    """Check the hand-authored tables before generating anything.

    Raises:
        CareError: naming the condition/aspect when keys repeat, an aspect has fewer than
            ``min_facts`` facts, a fact is not a full sentence, a related condition is unknown or
            not related back, a condition name is not its synonym group's canonical term, or
            benchmark and training templates overlap.
    """
    keys = [c.key for c in conditions]
    if len(set(keys)) != len(keys):
        raise CareError(f"condition keys repeat: {sorted(k for k in keys if keys.count(k) > 1)}")
    by_key = {c.key: c for c in conditions}
    for cond in conditions:
        for aspect in aspects:
            facts = cond.facts.get(aspect.key)
            if facts is None or len(facts) < min_facts:
                raise CareError(f"{cond.key}/{aspect.key}: needs at least {min_facts} fact sentences")
            for fact in facts:
                if not fact.endswith("。"):
                    raise CareError(f"{cond.key}/{aspect.key}: fact {fact!r} must end with '。'")
        extra = set(cond.facts) - {a.key for a in aspects}
        if extra:
            raise CareError(f"{cond.key}: facts for unknown aspects {sorted(extra)}")
        for other in cond.related:
            if other not in by_key:
                raise CareError(f"{cond.key}: related condition {other!r} is not defined")
            if cond.key not in by_key[other].related:
                raise CareError(f"{cond.key} lists {other} as related but not the other way round")
        group = lexicon.group_of(cond.name)
        if group is not None and group.terms[0] != cond.name:
            raise CareError(f"{cond.key}: name {cond.name!r} must be the first term of its synonym group {group.terms}")
    for aspect in aspects:
        overlap = set(aspect.bench_templates) & set(aspect.train_templates)
        if overlap:
            raise CareError(f"aspect {aspect.key}: templates used for both benchmark and training: {sorted(overlap)}")
