"""Chinese licence plates: a province character, the issuing-office letter, an optional separator
(``·``, ``•``, ``・``, ``.``, space) and five characters (``京A·12345``) or six for new-energy plates
(``粤B·D12345``, ``粤B12345D``). Plates never use I or O, and a regular plate body holds at most two
letters (GA 36-2018), so at least three digits: words like ``新HPV`` are not read as plates.
"""

from __future__ import annotations

import re

from care.curate.pii.rules import Span

PLATE_PROVINCES = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"
_LETTER = "A-HJ-NP-Z"
#: Digits a five-character plate body holds at least (at most two of its characters are letters).
MIN_PLATE_DIGITS = 3
PLATE_RE = re.compile(
    rf"(?<![A-Za-z0-9])[{PLATE_PROVINCES}][{_LETTER}]\s?[·•・.\s]?\s?"
    rf"(?P<body>[DF][{_LETTER}0-9]\d{{4}}|\d{{5}}[DF]|[{_LETTER}0-9]{{5}})(?![A-Za-z0-9])"
)


def find_plates(text: str) -> list[Span]:
    """Licence plates (see the module docstring)."""
    return [Span(m.start(), m.end(), "PLATE", m.group()) for m in PLATE_RE.finditer(text)
            if sum(c.isdigit() for c in m.group("body")) >= MIN_PLATE_DIGITS]
