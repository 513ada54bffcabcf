"""Recognisers for personal information in Chinese medical text.

Each recogniser is a function ``text -> list[Span]``. Structured identifiers are found by regular
expressions and then *validated* (resident-ID checksum ISO 7064 MOD 11-2 and birth date, bank-card
Luhn checksum), so that lab values, dates and order numbers are left alone. Person names and
addresses have no checksum; they are found by context (``患者``/``医生``/``住址`` ... and surname /
province lists), with jieba segmenting the name boundary where it is ambiguous.

Types (and the placeholder each becomes): ``PHONE ID EMAIL URL BANK_CARD MRN NAME ADDRESS``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import re
from dataclasses import dataclass
from importlib import resources

logger = logging.getLogger(__name__)

PII_TYPES: tuple[str, ...] = ("PHONE", "ID", "EMAIL", "URL", "BANK_CARD", "MRN", "NAME", "ADDRESS")
#: Types with a fixed syntax (and, for ID / BANK_CARD, a checksum): the recall target applies to these.
STRUCTURED_TYPES: frozenset[str] = frozenset({"PHONE", "ID", "EMAIL", "URL", "BANK_CARD", "MRN"})

#: When two candidate spans overlap, the one whose type comes first here wins (then the longer).
TYPE_PRIORITY: tuple[str, ...] = ("EMAIL", "URL", "ID", "BANK_CARD", "MRN", "PHONE", "ADDRESS", "NAME")

ID_WEIGHTS: tuple[int, ...] = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
ID_CHECK_CODES = "10X98765432"
EARLIEST_BIRTH_YEAR = 1900
BANK_CARD_LENGTHS = range(16, 20)
NAME_LENGTHS = (2, 3)
MAX_NAME_LENGTH = 4
NAME_WINDOW = 6

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


@functools.cache
def _word_list(name: str) -> tuple[str, ...]:
    text = resources.files("care.curate.resources").joinpath(name).read_text(encoding="utf-8")
    words = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        words.extend(line.split())
    return tuple(words)


def surnames() -> frozenset[str]:
    """Common single and compound Chinese surnames (``resources/surnames.txt``)."""
    return frozenset(_word_list("surnames.txt"))


def provinces() -> tuple[str, ...]:
    """Province-level division short names (``resources/provinces.txt``)."""
    return _word_list("provinces.txt")


# --- structured identifiers -------------------------------------------------------------------

_NO_DIGIT_BEFORE = r"(?<![0-9A-Za-z])"
_NO_DIGIT_AFTER = r"(?![0-9A-Za-z])"
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
URL_RE = re.compile(r"(?:https?://|www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'*+,;=%]+", re.IGNORECASE)
URL_TRAILING = ".,;:!?'"
MOBILE_RE = re.compile(_NO_DIGIT_BEFORE + r"(?:(?:\+|00)?86[-\s]?)?1[3-9]\d(?:[-\s]?\d{4}){2}" + _NO_DIGIT_AFTER)
_AREA_CODE = r"(?:010|02\d|0[3-9]\d{2})"
_LOCAL_NUMBER = r"[2-9]\d{6,7}(?:(?:-|转)\d{1,4})?"
#: A landline with its area code set off: ``010-62345678``, ``（0755）23456789``, ``0571 87654321``.
LANDLINE_RE = re.compile(
    _NO_DIGIT_BEFORE + rf"(?:[(（]{_AREA_CODE}[)）]\s?|{_AREA_CODE}[-\s]){_LOCAL_NUMBER}" + _NO_DIGIT_AFTER
)
#: A run-together landline (``01062345678``) looks like an order number, so it needs a phone word before it.
PHONE_CONTEXT = ("电话", "座机", "拨打", "致电", "热线", "传真", "联系方式", "手机", "Tel", "TEL", "tel")
LANDLINE_CONTEXT_RE = re.compile(
    r"(?:" + "|".join(PHONE_CONTEXT) + r")(?:号码|号)?\s*(?:[:：]|为|是)?\s*(?P<value>"
    + _NO_DIGIT_BEFORE + _AREA_CODE + _LOCAL_NUMBER + ")" + _NO_DIGIT_AFTER
)
ID18_RE = re.compile(_NO_DIGIT_BEFORE + r"\d{17}[\dXx]" + _NO_DIGIT_AFTER)
ID15_RE = re.compile(_NO_DIGIT_BEFORE + r"\d{15}" + _NO_DIGIT_AFTER)
BANK_CARD_RE = re.compile(_NO_DIGIT_BEFORE + r"(?:\d{4}(?:[ -]\d{4}){3}(?:[ -]?\d{1,3})?|\d{16,19})" + _NO_DIGIT_AFTER)
MRN_KEYWORDS = (
    "住院病历号", "病历号", "住院号", "门诊号", "病案号", "就诊号", "就诊卡号", "诊疗卡号", "登记号",
    "检查号", "影像号", "医保卡号", "社保卡号", "病理号", "床位号", "ID号",
)
MRN_RE = re.compile(
    r"(?:" + "|".join(sorted(MRN_KEYWORDS, key=len, reverse=True)) + r")(?:码)?\s*(?:[:：]|为|是)?\s*"
    r"(?P<value>[A-Za-z]{0,3}\d[0-9A-Za-z-]{2,19})" + _NO_DIGIT_AFTER
)


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
    spans += [Span(m.start("value"), m.end("value"), "PHONE", m.group("value")) for m in LANDLINE_CONTEXT_RE.finditer(text)]
    return spans


def find_resident_ids(text: str, *, old_ids: bool = False) -> list[Span]:
    spans = [Span(m.start(), m.end(), "ID", m.group()) for m in ID18_RE.finditer(text) if is_valid_resident_id(m.group())]
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


def find_record_numbers(text: str) -> list[Span]:
    return [Span(m.start("value"), m.end("value"), "MRN", m.group("value")) for m in MRN_RE.finditer(text)]


# --- person names -----------------------------------------------------------------------------

NAME_PREFIX_CONTEXT = (
    "患者", "病人", "病患", "患儿", "产妇", "孕妇", "家属", "医生", "医师", "大夫", "护士", "主任", "教授",
    "主治医师", "主治医生", "住院医师", "签名", "姓名", "联系人", "监护人", "本人", "之子", "之女", "其夫",
    "其妻", "儿子", "女儿", "丈夫", "妻子",
)
NAME_SUFFIX_CONTEXT = (
    "医生", "医师", "大夫", "护士", "主任", "教授", "先生", "女士", "同志", "老师", "院长", "小朋友",
)
_NAME_PREFIX_RE = re.compile(
    r"(?:" + "|".join(sorted(NAME_PREFIX_CONTEXT, key=len, reverse=True)) + r")(?:[:：]\s*|\s)?"
    + rf"(?=[{CJK}])"
)
#: ``张某`` / ``欧阳某某``: a surname then 某 (not ``于某日``, ``某某医院``).
_MASKED_NAME_RE = re.compile(r"某{1,2}(?![日天年月时处地种些个次项位家医院某一])")
_SUFFIX_NAME_RE = re.compile(
    rf"([{CJK}]{{2,4}}?)(?:" + "|".join(sorted(NAME_SUFFIX_CONTEXT, key=len, reverse=True)) + ")"
)


def _surname_len(candidate: str) -> int:
    """Length of the surname ``candidate`` starts with (2 for compound surnames), 0 if none."""
    names = surnames()
    if candidate[:2] in names:
        return 2
    if candidate[:1] in names:
        return 1
    return 0


def name_stopwords() -> frozenset[str]:
    """Words jieba tags as names (``nr``) that are common medical words (``resources/name_stopwords.txt``)."""
    return frozenset(_word_list("name_stopwords.txt"))


#: Characters that may follow a name that jieba did not recognise (punctuation, gender, 因/于/来 ...).
NAME_END_CHARS = frozenset("，。、；：！？,.;:!?（(）) \t\n男女因于在来已今等陪")
#: Function characters that never occur in a given name; a candidate containing one is not a name.
NOT_IN_GIVEN_NAME = frozenset("的了过着是在有和与及也都就让把被给很他她它我你您们这那个些来去到向对从为以或但而如即应需要可能会将时后前中上下里")
MAX_GIVEN_NAME_LENGTH = 2


def _in_dictionary(word: str) -> bool:
    """True when jieba's dictionary holds ``word`` (a common word rather than an unseen name)."""
    import jieba

    jieba.dt.check_initialized()
    return jieba.dt.FREQ.get(word, 0) > 0


def _plausible_given(chars: str) -> bool:
    """One or two Chinese characters that could be a given name: no function characters, and not a
    two-character dictionary word (首先, 药物, 患者)."""
    return (
        bool(chars) and re.fullmatch(f"[{CJK}]+", chars) is not None and not set(chars) & NOT_IN_GIVEN_NAME
        and not (len(chars) > 1 and _in_dictionary(chars))
    )


def _extend_name(text: str, start: int, word: str, surname: int) -> str:
    """Extend ``word`` (a surname, or a name jieba cut short: 胡玉|萱) by the characters up to a
    name-ending character, keeping the given name at most two characters long."""
    for extra in range(MAX_GIVEN_NAME_LENGTH - (len(word) - surname), 0, -1):
        end = start + len(word) + extra
        after = text[end:end + 1]
        if end <= len(text) and _plausible_given(text[start + len(word):end]) and (not after or after in NAME_END_CHARS):
            return text[start:end]
    return word


def _name_after(text: str, pos: int) -> str | None:
    """The person name starting at ``text[pos]`` (just after a context word), or None.

    jieba segments the window: a first token tagged as a name (``nr*``) that starts with a surname is
    taken (extended when jieba cut it short); a name jieba does not know (it splits it into single
    characters) is accepted when it is a surname plus one or two plausible given-name characters
    followed by punctuation, a gender or a clause word.
    """
    import jieba
    import jieba.posseg as pseg

    window = text[pos:pos + NAME_WINDOW]
    surname = _surname_len(window)
    if not surname:
        return None
    jieba.setLogLevel(logging.WARNING)
    first = pseg.lcut(window)[0]
    word = first.word
    if first.flag.startswith("nr") and len(word) <= MAX_NAME_LENGTH:
        if not _surname_len(word) or word in name_stopwords():
            return None
        word = _extend_name(text, pos, word, surname)
        return word if len(word) > surname else None
    if len(word) > surname and (_in_dictionary(word) or not _plausible_given(word[surname:])):
        return None  # jieba read a known non-name word here (查明, 平时 ...)
    word = _extend_name(text, pos, text[pos:pos + surname], surname)
    return word if len(word) > surname else None


def _name_before(candidate: str) -> str | None:
    """The name that ends ``candidate`` (the characters before 医生/主任 ...), or None.

    jieba's last token when it is tagged as a name, starts with a surname and is not a stop word;
    otherwise the 3- or 2-character tail that starts with a surname, holds plausible given-name
    characters and holds no dictionary word but the surname (an unknown name, not a word).
    """
    import jieba.posseg as pseg

    last = pseg.lcut(candidate)[-1]
    word = last.word
    if last.flag.startswith("nr") and NAME_LENGTHS[0] <= len(word) <= MAX_NAME_LENGTH and _surname_len(word) \
            and word not in name_stopwords():
        return word
    for length in reversed(NAME_LENGTHS):
        tail = candidate[-length:]
        surname = _surname_len(tail)
        if len(tail) == length and surname and surname < length and _plausible_given(tail[surname:]) \
                and all(len(t.word) == 1 or t.word == tail[:surname] or not _in_dictionary(t.word) for t in pseg.lcut(tail)):
            return tail
    return None


def find_names(text: str) -> list[Span]:
    """Person names anchored by context: ``患者王某某``, ``主治医师：李建国``, ``张伟医生``, ``刘某``."""
    spans: list[Span] = []
    for m in _NAME_PREFIX_RE.finditer(text):
        name = _name_after(text, m.end())
        if name:
            spans.append(Span(m.end(), m.end() + len(name), "NAME", name))
    for m in _MASKED_NAME_RE.finditer(text):
        start = m.start()
        if start >= 2 and text[start - 2:start] in surnames():
            start -= 2
        elif start >= 1 and text[start - 1] in surnames():
            start -= 1
        else:
            continue
        spans.append(Span(start, m.end(), "NAME", text[start:m.end()]))
    for m in _SUFFIX_NAME_RE.finditer(text):
        name = _name_before(m.group(1))
        if name:
            spans.append(Span(m.end(1) - len(name), m.end(1), "NAME", name))
    return spans


# --- addresses --------------------------------------------------------------------------------

ADDRESS_ANCHORS = ("家庭住址", "现住址", "户籍地址", "住址", "地址", "家住", "住在", "现住", "现居", "居住于", "居住在", "户籍")
_ADDR_UNITS = (
    rf"(?:[{CJK}]{{2,6}}?(?:省|自治区|特别行政区))?",
    rf"(?:[{CJK}]{{2,5}}?(?:市|自治州|州|盟|地区))?",
    rf"(?:[{CJK}]{{1,5}}?(?:区|县|旗))?",
    rf"(?:[{CJK}]{{1,6}}?(?:街道|镇|乡))?",
    rf"(?:[{CJK}0-9]{{1,8}}?(?:大道|路|街|巷|弄|胡同|村|小区|花园|公寓))?",
    r"(?:\d{1,5}(?:号院|号|弄))?",
    r"(?:\d{1,4}(?:号楼|栋|幢|座))?",
    r"(?:\d{1,3}单元)?",
    r"(?:\d{1,5}(?:室|号房|户))?",
)
_ADDR_BODY = "".join(_ADDR_UNITS)
_PROVINCE_SUFFIX = r"(?:省|市|壮族自治区|回族自治区|维吾尔自治区|自治区|特别行政区)?"
_ADDR_ANCHOR_RE = re.compile(
    r"(?:" + "|".join(sorted(ADDRESS_ANCHORS, key=len, reverse=True)) + r")(?:[:：]\s*|\s)?(?P<addr>" + _ADDR_BODY + ")"
)
#: An address needs at least this many of its units to be reported (a bare "北京市" is not personal).
MIN_ADDRESS_UNITS = 2
_UNIT_SUFFIX_RE = re.compile(r"(省|自治区|特别行政区|市|自治州|州|盟|地区|区|县|旗|街道|镇|乡|大道|路|街|巷|弄|胡同|村|小区|花园|公寓|号|栋|幢|座|单元|室|户)")


@functools.cache
def _province_address_re() -> re.Pattern[str]:
    provs = "|".join(sorted(provinces(), key=len, reverse=True))
    return re.compile(rf"(?P<addr>(?:{provs}){_PROVINCE_SUFFIX}" + "".join(_ADDR_UNITS[1:]) + ")")


def _address_units(value: str) -> int:
    return len(_UNIT_SUFFIX_RE.findall(value))


def find_addresses(text: str) -> list[Span]:
    """Addresses after an anchor (``住址：``, ``家住`` ...) or starting with a province name."""
    spans = []
    for pattern in (_ADDR_ANCHOR_RE, _province_address_re()):
        for m in pattern.finditer(text):
            value = m.group("addr")
            if value and _address_units(value) >= MIN_ADDRESS_UNITS:
                spans.append(Span(m.start("addr"), m.end("addr"), "ADDRESS", value))
    return spans
