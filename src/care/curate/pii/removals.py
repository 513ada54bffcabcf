"""What the anonymiser removes from real, unlabelled text, each removal with a verdict: spurious or not.

Real doctor answers hold almost no personal data, so nearly every removal there is a mistake that
changes the medical text. :func:`judge_removals` gives each removed span of one text a verdict:

- a person's judgement when one was recorded for ``(document id, span)`` (``judged``): spurious when
  the span is not personal data;
- else the reason :meth:`~care.curate.pii.clinical.NameGuard.why_not` finds against a name in Chinese
  characters (a clinical term, part of one, a medical word of encyclopedic text, a cut word, a symptom
  character): spurious;
- else ``unjudged``: it looks like personal data and needs a person to read it in its text.

:func:`summarise` counts removals, spurious ones and unjudged ones over a set of texts, per 1,000
texts. The target (at most :data:`SPURIOUS_TARGET_PER_1000`) is met only when it holds even if every
unjudged removal were spurious.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from care.curate.pii.clinical import NameGuard, segment
from care.curate.pii.rules import CJK, Span

#: Spurious removals per 1,000 real answers the anonymiser may make (issue 40).
SPURIOUS_TARGET_PER_1000 = 1.0
#: The verdict of a removal that no rule and no person has judged.
UNJUDGED = "unjudged"
PER = 1000

_CHINESE_RE = re.compile(f"[{CJK}]+")


@dataclass(frozen=True)
class Removal:
    """One removed span of one text: ``spurious`` is True (not personal data), False (personal data)
    or None (unjudged)."""

    doc_id: str
    type: str
    text: str
    start: int
    verdict: str
    spurious: bool | None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.doc_id, "type": self.type, "text": self.text, "start": self.start,
                "verdict": self.verdict, "spurious": self.spurious}


def judge_removals(doc_id: str, text: str, spans: Sequence[Span], guard: NameGuard,
                   judged: Mapping[tuple[str, str], tuple[bool, str]] | None = None) -> list[Removal]:
    """A verdict for every span removed from ``text`` (see the module docstring). ``judged`` maps
    ``(doc_id, span text)`` to ``(is personal data, why)``, as a person found by reading the text."""
    judged = judged or {}
    out: list[Removal] = []
    words: list[str] | None = None
    for span in spans:
        verdict, spurious = UNJUDGED, None
        if (doc_id, span.text) in judged:
            is_pii, why = judged[(doc_id, span.text)]
            verdict, spurious = f"judged: {why}", not is_pii
        elif span.type == "NAME" and _CHINESE_RE.fullmatch(span.text):
            words = words if words is not None else segment(text)
            reason = guard.why_not(text, span.start, span.end, words=words)
            if reason is not None:
                verdict, spurious = reason, True
        out.append(Removal(doc_id, span.type, span.text, span.start, verdict, spurious))
    return out


@dataclass
class RemovalSummary:
    """Removals over ``texts`` real texts: all of them, the spurious ones, the unjudged ones."""

    texts: int
    removed: int = 0
    spurious: int = 0
    unjudged: int = 0
    by_type: dict[str, int] = field(default_factory=dict)

    def per_1000(self, count: int) -> float:
        return PER * count / self.texts if self.texts else 0.0

    @property
    def spurious_per_1000(self) -> float:
        return self.per_1000(self.spurious)

    @property
    def meets_target(self) -> bool:
        """At most the target's spurious removals per 1,000 texts, counting the unjudged ones as spurious."""
        return self.per_1000(self.spurious + self.unjudged) <= SPURIOUS_TARGET_PER_1000

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update({"removed_per_1000": round(self.per_1000(self.removed), 2),
                    "spurious_per_1000": round(self.spurious_per_1000, 2),
                    "unjudged_per_1000": round(self.per_1000(self.unjudged), 2),
                    "target_spurious_per_1000": SPURIOUS_TARGET_PER_1000, "meets_target": self.meets_target})
        return out


def summarise(removals: Iterable[Removal], texts: int) -> RemovalSummary:
    """Counts of ``removals`` made on ``texts`` texts."""
    removals = list(removals)
    return RemovalSummary(
        texts=texts, removed=len(removals), spurious=sum(r.spurious is True for r in removals),
        unjudged=sum(r.spurious is None for r in removals),
        by_type=dict(sorted(Counter(r.type for r in removals).items())),
    )
