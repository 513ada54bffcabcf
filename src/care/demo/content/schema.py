"""Typed records for the hand-authored demo content (conditions, aspects, synonym groups)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Aspect:
    """One kind of question a patient asks about a condition (symptoms, causes, ...).

    Attributes:
        key: ascii identifier used in ids (``symptom``).
        label: Chinese label (``症状``).
        bench_templates: question templates (``{c}`` = condition surface form) used for the
            benchmark queries.
        train_templates: a disjoint set of templates used only for training queries, so no
            training query can repeat a benchmark query.
        openings: aspect-specific openings of a doctor's answer (``{c}`` = condition).
    """

    key: str
    label: str
    bench_templates: tuple[str, ...]
    train_templates: tuple[str, ...]
    openings: tuple[str, ...]


@dataclass(frozen=True)
class Condition:
    """A condition with a few plain-language fact sentences per aspect.

    Attributes:
        key: ascii identifier (``hypertension``).
        name: canonical Chinese name; when it belongs to a synonym group it is that group's
            first term, so queries and documents can use the other surface forms.
        department: the clinic a patient would visit (``心内科``), used in answer closings.
        facts: aspect key -> fact sentences (each a complete sentence ending in ``。``).
        related: keys of closely related conditions (same aspect there = partially relevant).
    """

    key: str
    name: str
    department: str
    facts: Mapping[str, tuple[str, ...]]
    related: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", MappingProxyType(dict(self.facts)))


@dataclass(frozen=True)
class SynonymGroup:
    """Terms with the same meaning (e.g. ``心肌梗死 / 心梗 / 心肌梗塞``).

    Attributes:
        terms: the surface forms; the first is the canonical one.
        category: what kind of term it is (``disease``, ``drug``, ``lab``, ``exam``,
            ``symptom``, ``pathogen``); STS question templates are chosen by category.
        query_only: colloquial members that patients say but doctors' answers do not use
            (``血压高``); documents never switch to them, queries and STS may.
    """

    terms: tuple[str, ...]
    category: str
    query_only: tuple[str, ...] = field(default=())

    @property
    def document_terms(self) -> tuple[str, ...]:
        """Members a doctor's answer may use."""
        return tuple(t for t in self.terms if t not in self.query_only)
