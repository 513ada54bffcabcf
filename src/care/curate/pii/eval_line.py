"""One line of the anonymiser's evaluation set and the builder that labels it as it is written.

An :class:`EvalLine` is a text with its gold PII spans (to be removed; ``type`` = the PII type) and
its keep spans (to be left alone; ``type`` = a keep category, :data:`KEEP_CLINICAL` or
:data:`KEEP_TRAP`). :class:`LineBuilder` appends pieces of text and records the span of each
labelled piece, so a line's spans are exact by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from care.curate.pii.rules import Span

#: Keep categories: a clinical value (number with a unit, a visit date, an order number) or a trap word.
KEEP_CLINICAL = "clinical"
KEEP_TRAP = "trap"


@dataclass(frozen=True)
class EvalLine:
    """One labelled line: gold PII spans (to remove) and keep spans (``type`` = keep category)."""

    text: str
    pii: tuple[Span, ...]
    keep: tuple[Span, ...]


class LineBuilder:
    """Builds an :class:`EvalLine` piece by piece: ``add(text, pii_type=..., keep=...)``, then ``build()``."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pii: list[Span] = []
        self.keep: list[Span] = []
        self.length = 0

    def add(self, text: str, pii_type: str | None = None, keep: str | None = None) -> None:
        """Append ``text``; a gold PII span of ``pii_type``, or a keep span of category ``keep``, or plain text."""
        span = Span(self.length, self.length + len(text), pii_type or keep or "", text)
        if pii_type:
            self.pii.append(span)
        elif keep:
            self.keep.append(span)
        self.parts.append(text)
        self.length += len(text)

    def add_marked(self, sentence: str, keep: str) -> None:
        """Add a sentence whose ``<bracketed>`` words are keep spans."""
        rest = sentence
        while "<" in rest:
            head, tail = rest.split("<", 1)
            word, rest = tail.split(">", 1)
            self.add(head)
            self.add(word, keep=keep)
        self.add(rest)

    def build(self) -> EvalLine:
        return EvalLine("".join(self.parts), tuple(self.pii), tuple(self.keep))


def digits(r: random.Random, n: int) -> str:
    """``n`` random decimal digits."""
    return "".join(r.choice("0123456789") for _ in range(n))
