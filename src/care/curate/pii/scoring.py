"""Scores of the anonymiser on a labelled set with things to remove and things to keep.

A gold identifier counts as **removed** only when every one of its characters (spaces aside) lies
inside some predicted span, whatever that span's type: an address cut at the road, or a card number
of which one group is left, has leaked. ``typed`` counts the gold spans overlapped by a predicted
span of their own type (the per-type recall), ``exact`` those a predicted span of their type matches
to the character. A keep span (a clinical value or a trap word) counts as **kept** when no
predicted span touches it. Predicted spans that touch no gold span are counted as ``spurious``;
per type, ``predicted`` counts the predicted spans and those overlapping a gold span of their type
(``hits``: the precision).

Inputs: lines with ``pii`` and ``keep`` spans (:class:`care.curate.pii.eval_line.EvalLine`) and the
predicted spans of each line. Output: :class:`EvalScores` (per type, per group, per keep category).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from care.curate.pii.rules import STRUCTURED_TYPES, Span

#: Groups with their own targets (issue 17): structured identifiers, and names + addresses.
GROUPS: dict[str, frozenset[str]] = {"STRUCTURED": STRUCTURED_TYPES, "NAME_ADDRESS": frozenset({"NAME", "ADDRESS"})}
#: The recall / kept shares the benchmark checks.
TARGETS: dict[str, float] = {"STRUCTURED": 0.97, "NAME_ADDRESS": 0.90, "KEPT": 0.99}


@dataclass
class Count:
    """``hits`` of ``total`` (with the share); for gold spans also ``typed`` and ``exact`` (module docstring)."""

    total: int = 0
    hits: int = 0
    typed: int = 0
    exact: int = 0

    @property
    def share(self) -> float:
        return self.hits / self.total if self.total else 1.0

    @property
    def typed_share(self) -> float:
        """The per-type recall: gold spans overlapped by a predicted span of their type, of all."""
        return self.typed / self.total if self.total else 1.0

    def add(self, hit: bool, typed: bool = False, exact: bool = False) -> None:
        """Count one span."""
        self.total += 1
        self.hits += hit
        self.typed += typed
        self.exact += exact

    def merged(self, other: Count) -> Count:
        """The counts of ``self`` and ``other`` together."""
        return Count(self.total + other.total, self.hits + other.hits, self.typed + other.typed,
                     self.exact + other.exact)

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "hits": self.hits, "share": round(self.share, 4), "typed": self.typed,
                "exact": self.exact}


@dataclass
class EvalScores:
    """Per PII type and group: removed (``hits``), typed, exact, and the predicted spans (``hits``: of the
    right type on a gold span of it); per keep category: kept (``hits``)."""

    removed: dict[str, Count] = field(default_factory=dict)
    kept: dict[str, Count] = field(default_factory=dict)
    predicted: dict[str, Count] = field(default_factory=dict)
    spurious: int = 0
    leaks: list[dict[str, str]] = field(default_factory=list)
    lost: list[dict[str, str]] = field(default_factory=list)

    def meets_targets(self) -> dict[str, bool]:
        return {"STRUCTURED": self.removed["STRUCTURED"].share >= TARGETS["STRUCTURED"],
                "NAME_ADDRESS": self.removed["NAME_ADDRESS"].share >= TARGETS["NAME_ADDRESS"],
                "KEPT": self.kept["ALL"].share >= TARGETS["KEPT"]}

    def as_dict(self) -> dict[str, Any]:
        return {"removed": {k: v.as_dict() for k, v in self.removed.items()},
                "kept": {k: v.as_dict() for k, v in self.kept.items()}, "spurious": self.spurious,
                "predicted": {k: v.as_dict() for k, v in self.predicted.items()}, "meets_targets": self.meets_targets()}

    def merged(self, other: EvalScores) -> EvalScores:
        """The scores of two sets of lines together (the leak and lost lists one after the other)."""
        out = EvalScores(spurious=self.spurious + other.spurious, leaks=self.leaks + other.leaks,
                         lost=self.lost + other.lost)
        for name in ("removed", "kept", "predicted"):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(out, name, {key: mine.get(key, Count()).merged(theirs.get(key, Count()))
                                for key in {**mine, **theirs}})
        return out


def covered(gold: Span, predicted: Sequence[Span]) -> bool:
    """True when every non-space character of ``gold`` lies inside a predicted span."""
    return all(any(p.start <= i < p.end for p in predicted) for i in range(gold.start, gold.end)
               if not gold.text[i - gold.start].isspace())


def _touches(a: Span, b: Span) -> bool:
    return a.start < b.end and b.start < a.end


def _keys(pii_type: str) -> list[str]:
    """The type itself, the groups holding it, and ``ALL``."""
    return [pii_type, *(g for g, types in GROUPS.items() if pii_type in types), "ALL"]


def score_eval_set(lines: Iterable[Any], predictions: Iterable[Sequence[Span]]) -> EvalScores:
    """Score ``predictions[i]`` against ``lines[i].pii`` / ``lines[i].keep``."""
    scores = EvalScores()
    for line, pred in zip(lines, predictions, strict=True):
        for gold in line.pii:
            ok = covered(gold, pred)
            typed = any(p.type == gold.type and _touches(p, gold) for p in pred)
            exact = any(p.type == gold.type and (p.start, p.end) == (gold.start, gold.end) for p in pred)
            for key in _keys(gold.type):
                scores.removed.setdefault(key, Count()).add(ok, typed, exact)
            if not ok:
                scores.leaks.append({"type": gold.type, "value": gold.text, "text": line.text})
        for keep in line.keep:
            ok = not any(_touches(p, keep) for p in pred)
            for key in (keep.type, "ALL"):
                scores.kept.setdefault(key, Count()).add(ok)
            if not ok:
                scores.lost.append({"category": keep.type, "value": keep.text, "text": line.text})
        for p in pred:
            right = any(g.type == p.type and _touches(p, g) for g in line.pii)
            for key in _keys(p.type):
                scores.predicted.setdefault(key, Count()).add(right)
        scores.spurious += sum(not any(_touches(p, g) for g in line.pii) for p in pred)
    for group in (*GROUPS, "ALL"):
        scores.removed.setdefault(group, Count())
    scores.kept.setdefault("ALL", Count())
    return scores


def summary(scores: EvalScores) -> dict[str, Any]:
    """The scores as plain data, with the first leaks and lost keeps for a reader to look at."""
    return {**scores.as_dict(), "leaks": scores.leaks[:50], "lost": scores.lost[:50]}



