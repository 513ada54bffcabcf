"""Dates of birth: a date announced by a birth label (``出生日期：1985-03-12``, ``生日 1985年3月12日``,
``DOB 1985/3/12``) or followed by ``出生`` / ``生人`` (``一九八五年三月十二日出生``).

Dates without such a word (visit dates, ``2023年5月1日复查``) are clinical information and stay.
Forms: ``1985年3月12日`` (spaces allowed), ``1985年03月``, ``1985-03-12``, ``1985/3/12``, ``1985.03.12``,
``19850312``, two-digit years (``85年3月12日``) and Chinese numerals (``一九八五年三月十二日``).
"""

from __future__ import annotations

import re

from care.curate.pii.rules import Span

BIRTH_LABELS = ("出生日期", "出生年月日", "出生年月", "出生于", "出生在", "出生", "生于", "生日", "出生时间", "DOB", "D.O.B.",
                "Date of birth", "Birthday", "birth date")
_CN_NUM = "〇零一二三四五六七八九十"
_DATE = (
    r"(?:(?:19|20)\d{2}|\d{2})\s*年\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?"
    r"|(?:19|20)\d{2}(?P<sep>[-/.])\d{1,2}(?P=sep)\d{1,2}"
    r"|(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
    rf"|[{_CN_NUM}]{{2,4}}年[{_CN_NUM}]{{1,2}}月(?:[{_CN_NUM}]{{1,3}}[日号])?"
)
_LABELLED_RE = re.compile(
    r"(?i:" + "|".join(re.escape(label) for label in sorted(BIRTH_LABELS, key=len, reverse=True)) + r")"
    + r"\s*(?:日期)?\s*(?:是|为)?\s*[:：]?\s*(?P<date>" + _DATE + r")(?![0-9])"
)
#: A date then ``出生`` / ``生人`` / a lone ``生`` that ends the clause (not ``生化``, ``生病``).
_FOLLOWED_RE = re.compile(r"(?<![0-9])(?P<date>" + _DATE + r")\s*(?:出生|生人|生(?=$|[，。,.;；!！?？\s)）的]))")


def find_birth_dates(text: str) -> list[Span]:
    """Birth dates after a birth label or before ``出生`` (see the module docstring)."""
    spans = [Span(m.start("date"), m.end("date"), "BIRTH_DATE", m.group("date")) for m in _LABELLED_RE.finditer(text)]
    spans += [Span(m.start("date"), m.end("date"), "BIRTH_DATE", m.group("date")) for m in _FOLLOWED_RE.finditer(text)]
    return spans
