"""Scores of the anonymiser on a labelled set with things to remove and things to keep.

A gold identifier counts as **removed** only when every one of its characters (spaces aside) lies
inside some predicted span, whatever that span's type: an address cut at the road, or a card number
of which one group is left, has leaked. ``typed`` counts the gold spans overlapped by a predicted
span of their own type. A keep span (a clinical value or a trap word) counts as **kept** when no
predicted span touches it. Predicted spans that touch no gold span are counted as ``spurious``.

Inputs: lines with ``pii`` and ``keep`` spans (:class:`care.curate.pii_eval_set.EvalLine`) and the
predicted spans of each line. Output: :class:`EvalScores` (per type, per group, per keep category).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from care.curate.pii_rules import STRUCTURED_TYPES, Span

#: Groups with their own targets (issue 17): structured identifiers, and names + addresses.
GROUPS: dict[str, frozenset[str]] = {"STRUCTURED": STRUCTURED_TYPES, "NAME_ADDRESS": frozenset({"NAME", "ADDRESS"})}
#: The recall / kept shares the benchmark checks.
TARGETS: dict[str, float] = {"STRUCTURED": 0.97, "NAME_ADDRESS": 0.90, "KEPT": 0.99}


@dataclass
class Count:
    """``hits`` of ``total`` (with the share)."""

    total: int = 0
    hits: int = 0
    typed: int = 0

    @property
    def share(self) -> float:
        return self.hits / self.total if self.total else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "hits": self.hits, "share": round(self.share, 4), "typed": self.typed}


@dataclass
class EvalScores:
    """Per PII type: removed (``hits``) and typed; per group; per keep category: kept (``hits``)."""

    removed: dict[str, Count] = field(default_factory=dict)
    kept: dict[str, Count] = field(default_factory=dict)
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
                "meets_targets": self.meets_targets()}


def covered(gold: Span, predicted: Sequence[Span]) -> bool:
    """True when every non-space character of ``gold`` lies inside a predicted span."""
    return all(any(p.start <= i < p.end for p in predicted) for i in range(gold.start, gold.end)
               if not gold.text[i - gold.start].isspace())


def _touches(a: Span, b: Span) -> bool:
    return a.start < b.end and b.start < a.end


def score_eval_set(lines: Iterable[Any], predictions: Iterable[Sequence[Span]]) -> EvalScores:
    """Score ``predictions[i]`` against ``lines[i].pii`` / ``lines[i].keep``."""
    scores = EvalScores()
    for line, pred in zip(lines, predictions, strict=True):
        for gold in line.pii:
            ok, typed = covered(gold, pred), any(p.type == gold.type and _touches(p, gold) for p in pred)
            for key in [gold.type, *(g for g, types in GROUPS.items() if gold.type in types), "ALL"]:
                count = scores.removed.setdefault(key, Count())
                count.total += 1
                count.hits += ok
                count.typed += typed
            if not ok:
                scores.leaks.append({"type": gold.type, "value": gold.text, "text": line.text})
        for keep in line.keep:
            ok = not any(_touches(p, keep) for p in pred)
            for key in (keep.type, "ALL"):
                count = scores.kept.setdefault(key, Count())
                count.total += 1
                count.hits += ok
            if not ok:
                scores.lost.append({"category": keep.type, "value": keep.text, "text": line.text})
        scores.spurious += sum(not any(_touches(p, g) for g in line.pii) for p in pred)
    for group in (*GROUPS, "ALL"):
        scores.removed.setdefault(group, Count())
    scores.kept.setdefault("ALL", Count())
    return scores


def summary(scores: EvalScores) -> dict[str, Any]:
    """The scores as plain data, with the first leaks and lost keeps for a reader to look at."""
    return {**scores.as_dict(), "leaks": scores.leaks[:50], "lost": scores.lost[:50]}



