"""Rules for structured personal identifiers in Chinese medical text, and the shared span type.

Each recogniser is a function ``text -> list[Span]``. Identifiers found *without* a label are matched
by shape and then *validated* (resident-ID checksum ISO 7064 MOD 11-2 and birth date, bank-card
Luhn checksum), so that lab values, dates and order numbers are left alone; identifiers *with* a
label (``身份证``, ``卡号``, ``住院号`` ...) are removed whatever their checksum
(:mod:`care.curate.pii.labels`). Names, addresses, birth dates and licence plates have their own
modules (:mod:`.names`, :mod:`.address`, :mod:`.birth_dates`, :mod:`.plates`).

Text is matched after :func:`normalise_width` (full-width digits and letters read as half-width,
one character for one, so offsets do not move).

Types (and the placeholder each becomes): see :data:`PII_TYPES`.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import re
from dataclasses import dataclass
from importlib import resources

logger = logging.getLogger(__name__)

PII_TYPES: tuple[str, ...] = ("PHONE", "ID", "EMAIL", "URL", "BANK_CARD", "MRN", "PASSPORT", "WECHAT", "QQ",
                              "PLATE", "BIRTH_DATE", "NAME", "ADDRESS")
#: Types with a fixed syntax (a label, a checksum or a shape): the 0.97 recall target applies to these.
STRUCTURED_TYPES: frozenset[str] = frozenset(PII_TYPES) - {"NAME", "ADDRESS"}

#: When two candidate spans overlap, the one whose type comes first here wins (then the longer).
TYPE_PRIORITY: tuple[str, ...] = ("EMAIL", "URL", "ID", "BANK_CARD", "PASSPORT", "MRN", "PHONE", "QQ", "WECHAT",
                                  "PLATE", "BIRTH_DATE", "ADDRESS", "NAME")

ID_WEIGHTS: tuple[int, ...] = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
ID_CHECK_CODES = "10X98765432"
EARLIEST_BIRTH_YEAR = 1900
BANK_CARD_LENGTHS = range(16, 20)

CJK = "\u4e00-\u9fa5"


@dataclass(frozen=True, order=True)
class Span:
    """A detected piece of personal information: ``text[start:end]`` of type ``type``."""

    start: int
    end: int
    type: str
    text: str


def id_checksum_char(first17: str) -> str:
    """The ISO 7064 MOD 11-2 check character of an 18-digit resident ID (GB 11643-1999)."""
    total = sum(int(c) * w for c, w in zip(first17, ID_WEIGHTS))
    return ID_CHECK_CODES[total % 11]


def _valid_date(year: int, month: int, day: int) -> bool:
    try:
        date = _dt.date(year, month, day)
    except ValueError:
        return False
    return EARLIEST_BIRTH_YEAR <= date.year and date <= _dt.date.today()


def is_valid_resident_id(number: str) -> bool:
    """True for an 18-digit ID with a real birth date and a correct MOD 11-2 check character."""
    if len(number) != 18 or not number[:17].isdigit():
        return False
    if not _valid_date(int(number[6:10]), int(number[10:12]), int(number[12:14])):
        return False
    return id_checksum_char(number[:17]) == number[17].upper()


def is_valid_old_resident_id(number: str) -> bool:
    """True for a 15-digit (pre-1999) ID whose YYMMDD birth date is real (no checksum exists)."""
    if len(number) != 15 or not number.isdigit():
        return False
    return _valid_date(1900 + int(number[6:8]), int(number[8:10]), int(number[10:12]))


def luhn_valid(number: str) -> bool:
    """The Luhn (mod 10) checksum used by bank cards."""
    if not number.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


#: Full-width ASCII (U+FF01..U+FF5E) and the ideographic space, read as their half-width forms.
_HALF_WIDTH = {**{cp: cp - 0xFEE0 for cp in range(0xFF10, 0xFF1A)}, **{cp: cp - 0xFEE0 for cp in range(0xFF21, 0xFF3B)},
               **{cp: cp - 0xFEE0 for cp in range(0xFF41, 0xFF5B)}, **{ord(c): ord(c) - 0xFEE0 for c in "＠．－＿＋／＃"},
               0x3000: ord(" ")}


def normalise_width(text: str) -> str:
    """``text`` with full-width digits, letters and ``＠．－＿＋／＃`` (and U+3000) made half-width.

    One character maps to one, so spans found in the result are spans of ``text``. Chinese
    punctuation (``，：（）``) is kept: the rules accept both forms.
    """
    return text.translate(_HALF_WIDTH)


@functools.cache
def resource_words(name: str) -> tuple[str, ...]:
    """The whitespace-separated words of ``care/curate/pii/resources/<name>`` (``#`` lines are comments)."""
    text = resources.files("care.curate.pii.resources").joinpath(name).read_text(encoding="utf-8")
    words = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        words.extend(line.split())
    return tuple(words)


def surnames() -> frozenset[str]:
    """Common single and compound Chinese surnames (``resources/surnames.txt``)."""
    return frozenset(resource_words("surnames.txt"))


def provinces() -> tuple[str, ...]:
    """Province-level division short names (``resources/provinces.txt``)."""
    return resource_words("provinces.txt")


# --- structured identifiers -------------------------------------------------------------------

_NO_DIGIT_BEFORE = r"(?<![0-9A-Za-z])"
_NO_DIGIT_AFTER = r"(?![0-9A-Za-z])"
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
URL_RE = re.compile(r"(?:https?://|www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'*+,;=%]+", re.IGNORECASE)
URL_TRAILING = ".,;:!?'"
MOBILE_RE = re.compile(_NO_DIGIT_BEFORE + r"(?:(?:\+|00)?86[-\s]?)?1[3-9]\d(?:[-\s]?\d{4}){2}" + _NO_DIGIT_AFTER)
_AREA_CODE = r"(?:010|02\d|0[3-9]\d{2})"
#: The local number, run together or grouped 4-4 / 3-4 by a space or hyphen (``6234 5678``).
_LOCAL_NUMBER = r"(?:[2-9]\d{6,7}|[2-9]\d{2,3}[-\s]\d{4})(?:(?:-|转)\d{1,4})?"
#: A landline with its area code set off: ``010-62345678``, ``（0755）23456789``, ``0571 87654321``.
LANDLINE_RE = re.compile(
    _NO_DIGIT_BEFORE + rf"(?:[(（]{_AREA_CODE}[)）]\s?|{_AREA_CODE}[-\s]){_LOCAL_NUMBER}" + _NO_DIGIT_AFTER
)
#: 18 characters, run together or grouped 6-8-4 by spaces or hyphens (``110105 19491231 002X``).
ID18_RE = re.compile(_NO_DIGIT_BEFORE + r"\d{6}([-\s]?)\d{8}\1\d{3}[\dXx]" + _NO_DIGIT_AFTER)
ID15_RE = re.compile(_NO_DIGIT_BEFORE + r"\d{15}" + _NO_DIGIT_AFTER)
BANK_CARD_RE = re.compile(_NO_DIGIT_BEFORE + r"(?:\d{4}(?:[ -]\d{4}){3}(?:[ -]?\d{1,3})?|\d{16,19})" + _NO_DIGIT_AFTER)

def find_emails(text: str) -> list[Span]:
    return [Span(m.start(), m.end(), "EMAIL", m.group()) for m in EMAIL_RE.finditer(text)]


def find_urls(text: str) -> list[Span]:
    spans = []
    for m in URL_RE.finditer(text):
        value = m.group().rstrip(URL_TRAILING)
        spans.append(Span(m.start(), m.start() + len(value), "URL", value))
    return spans


def find_phones(text: str) -> list[Span]:
    spans = [Span(m.start(), m.end(), "PHONE", m.group()) for m in MOBILE_RE.finditer(text)]
    spans += [Span(m.start(), m.end(), "PHONE", m.group()) for m in LANDLINE_RE.finditer(text)]
    return spans


def find_resident_ids(text: str, *, old_ids: bool = False) -> list[Span]:
    spans = [Span(m.start(), m.end(), "ID", m.group()) for m in ID18_RE.finditer(text)
             if is_valid_resident_id(re.sub(r"[-\s]", "", m.group()))]
    if old_ids:
        spans += [Span(m.start(), m.end(), "ID", m.group()) for m in ID15_RE.finditer(text)
                  if is_valid_old_resident_id(m.group())]
    return spans


def find_bank_cards(text: str) -> list[Span]:
    spans = []
    for m in BANK_CARD_RE.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if len(digits) in BANK_CARD_LENGTHS and luhn_valid(digits):
            spans.append(Span(m.start(), m.end(), "BANK_CARD", m.group()))
    return spans
