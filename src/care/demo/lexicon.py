"""Synonym lookup and surface-form variation over the demo's medical synonym dictionary."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from typing import Literal

from care.demo.content.schema import SynonymGroup
from care.errors import CareError

Audience = Literal["document", "query"]


class SynonymLexicon:
    """Finds dictionary terms in text (longest match first) and swaps them for synonyms.

    Args:
        groups: synonym groups; every term must belong to exactly one group.
        protected: phrases matched before any term and never changed (``偏头痛``-style words
            whose inner term must not be switched).
    Raises:
        CareError: a term in two groups, a group with fewer than two terms, or ``query_only``
            members that are not terms of the group.
    """

    def __init__(self, groups: Iterable[SynonymGroup], protected: Iterable[str] = ()) -> None:
        self.groups: tuple[SynonymGroup, ...] = tuple(groups)
        self._group_of: dict[str, SynonymGroup] = {}
        for group in self.groups:
            if len(set(group.terms)) < 2:
                raise CareError(f"synonym group {group.terms} needs at least two distinct terms")
            unknown = set(group.query_only) - set(group.terms)
            if unknown:
                raise CareError(f"synonym group {group.terms}: query_only {sorted(unknown)} are not its terms")
            if not group.document_terms:
                raise CareError(f"synonym group {group.terms}: every term is query_only; keep one for documents")
            for term in group.terms:
                if not term.strip():
                    raise CareError(f"synonym group {group.terms} has an empty term")
                if term in self._group_of:
                    raise CareError(
                        f"term {term!r} is in two synonym groups: {self._group_of[term].terms} and {group.terms}; "
                        "merge them or drop one"
                    )
                self._group_of[term] = group
        self.protected: frozenset[str] = frozenset(protected)
        alternatives = sorted(set(self._group_of) | self.protected, key=lambda t: (-len(t), t))
        self._pattern = re.compile("|".join(re.escape(t) for t in alternatives))

    def group_of(self, term: str) -> SynonymGroup | None:
        """The group holding ``term``, or ``None``."""
        return self._group_of.get(term)

    def surface_forms(self, term: str, audience: Audience) -> tuple[str, ...]:
        """The forms ``term`` may take for ``audience`` (itself alone when it has no group)."""
        group = self._group_of.get(term)
        if group is None:
            return (term,)
        return group.terms if audience == "query" else group.document_terms

    def find_terms(self, text: str) -> list[str]:
        """Dictionary terms in ``text``, left to right, longest match first, protected phrases skipped."""
        return [m.group(0) for m in self._pattern.finditer(text) if m.group(0) not in self.protected]

    def vary(self, text: str, rng: random.Random, audience: Audience = "document") -> str:
        """Replace each dictionary term in ``text`` by a random surface form allowed for ``audience``.

        The replacement may be the term itself, so a text keeps some canonical forms.
        """

        def pick(match: re.Match[str]) -> str:
            term = match.group(0)
            if term in self.protected:
                return term
            return rng.choice(self.surface_forms(term, audience))

        return self._pattern.sub(pick, text)
