"""Person names in Chinese medical text: what a lexical tagger marks as a person, checked and completed
by context.

Sources of a ``NAME`` span (``find_names(text, tokens)``, ``tokens`` from a
:class:`~care.curate.pii.lexical.LexicalTagger`):

1. the tagger's person tokens (adjacent ones merged: jieba's ``徐|志强``), kept when they start with
   a surname, are 2-4 Chinese characters, are not a common word (``resources/name_stopwords.txt``,
   or a jieba dictionary word not tagged as a name) and hold no function character; a trailing title
   (LAC's ``陈主任``) is cut off;
2. names after a context word (``患者``, ``我叫``, ``主治医生：``, ``护士长`` ...) or before a title
   (``医生``, ``女士``, ``老人`` ...) that the tagger missed, read by surname + given-name rules; the
   candidate must start and end on the tagger's word boundaries, so ``及时看医生`` (``及时|看``)
   gives no name;
3. masked names (``张某``, ``欧阳某某``);
4. names in Latin script: a pinyin surname and a one- or two-syllable given name (``Zhang Wei``,
   ``LIU Yang``, ``Ouyang Nana``), or a surname after ``Dr.`` / ``Mr.`` / ``Ms.``;
5. **surname + title policy**: a surname directly before a title (``赵医生``, ``陈主任``, ``宋女士``,
   ``王奶奶``) is removed and the title kept (``[NAME]医生``): a surname and a title name one person
   within a clinic. The surname must be a word of its own for the tagger (not a preposition: ``向医生``,
   ``于医生处``) -- see ``docs/curate.md``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence

from care.curate.pii.lexical import ORGANISATION, PERSON, Token
from care.curate.pii.rules import CJK, Span, resource_words, surnames

logger = logging.getLogger(__name__)

#: Lengths of a name ending before a title that the rules read (4 only with a compound surname).
NAME_LENGTHS = (2, 3, 4)
MAX_GIVEN_NAME_LENGTH = 2
#: The length of a compound surname (欧阳, 令狐).
COMPOUND_SURNAME_LENGTH = 2
NAME_WINDOW = 6

#: Words that introduce a name right after them (longest first when matched).
NAME_PREFIX_CONTEXT = (
    "患者", "病人", "病患", "患儿", "新生儿", "产妇", "孕妇", "家属", "陪护", "医生", "医师", "大夫", "护士", "主任", "教授",
    "护士长", "责任护士", "主治医师", "主治医生", "住院医师", "管床医生", "值班医生", "主刀医生", "麻醉医生", "主刀", "会诊医生",
    "签名", "姓名", "患者姓名", "联系人", "监护人", "本人", "我叫", "名叫", "叫做", "我是", "他叫", "她叫", "名字是", "名字叫",
    "之子", "之女", "其夫", "其妻", "儿子", "女儿", "丈夫", "妻子", "老婆", "老公", "我爸", "我妈", "爷爷", "奶奶", "外婆", "姥姥",
)
#: Titles after a name (``张伟医生``, ``王秀英老人``); the surname + title policy uses the same list.
NAME_SUFFIX_CONTEXT = (
    "医生", "医师", "大夫", "护士长", "护士", "主任", "教授", "院长", "先生", "女士", "小姐", "同志", "老师", "老人", "阿姨",
    "叔叔", "爷爷", "奶奶", "大爷", "大妈", "师傅", "小朋友",
)
#: Tags (jieba and LAC) of function words: a surname character tagged so is not a surname there (向医生, 于医生处).
FUNCTION_TAGS = frozenset({"p", "c", "u", "d", "r", "v", "vd", "ad", "f", "q", "m", "w", "x", "xc", "uj", "ul", "zg", "TIME"})
#: Tags of named entities: a name before a title that the tagger read as one entity is a name (潘超医生).
ENTITY_TAGS = frozenset({PERSON, ORGANISATION})
#: Tags (LAC and jieba) of nouns, numbers and adjectives: what a bare two-character "name" must not precede.
NOUN_LIKE_TAGS = frozenset({"n", "nz", "nw", "ng", "m", "mq", "q", "a", "an", "vn", "s", "eng", "LOC", "ORG"})
#: Characters that may follow a name that no tagger recognised (punctuation, gender, 因/于/来 ...).
NAME_END_CHARS = frozenset("，。、；：！？,.;:!?（(）) \t\n男女因于在来已今等陪说也最的这代医")
#: Function characters that never occur in a given name; a candidate containing one is not a name.
NOT_IN_GIVEN_NAME = frozenset("的了过着是在有和与及也都就让把被给很他她它我你您们这那个些来去到向对从为以或但而如即应需要可能会将时后前中上下里说")

_NAME_PREFIX_RE = re.compile(
    r"(?:" + "|".join(sorted(NAME_PREFIX_CONTEXT, key=len, reverse=True)) + r")(?:[:：]\s*|\s)?" + rf"(?=[{CJK}])"
)
_TITLE_RE = re.compile("|".join(sorted(NAME_SUFFIX_CONTEXT, key=len, reverse=True)))
#: How far before a name its context word (plus a colon and a space) can start.
_LONGEST_PREFIX = max(map(len, NAME_PREFIX_CONTEXT)) + 2
#: ``张某`` / ``欧阳某某``: a surname then 某 (not ``于某日``, ``某某医院``).
_MASKED_NAME_RE = re.compile(r"某{1,2}(?![日天年月时处地种些个次项位家医院某一])")
_SUFFIX_NAME_RE = re.compile(rf"([{CJK}]{{2,4}}?)(?:" + "|".join(sorted(NAME_SUFFIX_CONTEXT, key=len, reverse=True)) + ")")
#: One pinyin syllable (initial + final), for Latin-script given names.
_PINYIN_SYLLABLE = (r"(?:zh|ch|sh|[bpmfdtnlgkhjqxrzcsyw])?"
                    r"(?:iang|iong|uang|ang|eng|ing|ong|ian|iao|uai|uan|ai|ei|ao|ou|an|en|er|ia|ie|in|iu|ua|uo|ui|un|ue|ve|a|o|e|i|u|v)")
_GIVEN_PINYIN_RE = re.compile(rf"(?:{_PINYIN_SYLLABLE}){{1,2}}", re.IGNORECASE)
_LATIN_TITLE_RE = re.compile(r"(?<![A-Za-z])(?:Dr|Mr|Mrs|Ms|Miss|Prof)\.?\s+(?P<name>[A-Z][a-z]+|[A-Z]{2,})(?![A-Za-z])")
_LATIN_NAME_RE = re.compile(r"(?<![A-Za-z])(?P<first>[A-Z][a-z]+|[A-Z]{2,})[ \u00a0]+(?P<second>[A-Z][a-z]+(?:-[A-Za-z][a-z]+)?)(?![A-Za-z])")


def name_stopwords() -> frozenset[str]:
    """Words taggers read as person names that are not (``resources/name_stopwords.txt``)."""
    return frozenset(resource_words("name_stopwords.txt"))


@functools.cache
def pinyin_surnames() -> frozenset[str]:
    """Pinyin spellings of common surnames, lower case (``resources/pinyin_surnames.txt``)."""
    return frozenset(w.lower() for w in resource_words("pinyin_surnames.txt"))


def surname_length(candidate: str) -> int:
    """Length of the surname ``candidate`` starts with (2 for compound surnames), 0 if none."""
    names = surnames()
    if len(candidate) >= 2 and candidate[:2] in names:
        return 2
    if candidate[:1] in names:
        return 1
    return 0


@functools.cache
def _jieba_dicts() -> tuple[dict[str, int], dict[str, str]]:
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    jieba.dt.check_initialized()
    return jieba.dt.FREQ, jieba.posseg.dt.word_tag_tab


def jieba_word_tags() -> dict[str, str]:
    """jieba's dictionary words and their part-of-speech tags (``nr`` for person names)."""
    return _jieba_dicts()[1]


def in_dictionary(word: str) -> bool:
    """True when jieba's dictionary holds ``word`` (a common word rather than an unseen name)."""
    return _jieba_dicts()[0].get(word, 0) > 0


def _common_word(word: str) -> bool:
    """A dictionary word that jieba does not tag as a person name (谢谢, 安静, 阳光)."""
    tag = _jieba_dicts()[1].get(word)
    return tag is not None and not tag.startswith("nr")


def _plausible_given(chars: str) -> bool:
    """One or two Chinese characters that could be a given name: no function characters, and not a
    two-character dictionary word (首先, 药物, 患者)."""
    return (
        bool(chars) and re.fullmatch(f"[{CJK}]+", chars) is not None and not set(chars) & NOT_IN_GIVEN_NAME
        and not (len(chars) > 1 and in_dictionary(chars))
    )


def valid_name(word: str) -> bool:
    """A Chinese full name: surname + one or two given-name characters, not a stop word or common word."""
    surname = surname_length(word)
    given = word[surname:]
    return (
        bool(surname) and 1 <= len(given) <= MAX_GIVEN_NAME_LENGTH and re.fullmatch(f"[{CJK}]+", word) is not None
        and word not in name_stopwords() and not _common_word(word) and not set(given) & NOT_IN_GIVEN_NAME
    )


class _Boundaries:
    """Word boundaries and tags of one text from its tokens."""

    def __init__(self, tokens: Sequence[Token]) -> None:
        self.tokens = list(tokens)
        self.edges = {t.start for t in tokens} | {t.end for t in tokens}
        self.by_start = {t.start: t for t in tokens}

    def aligned(self, start: int, end: int) -> bool:
        return start in self.edges and end in self.edges

    def person_at(self, start: int) -> bool:
        token = self.by_start.get(start)
        return token is not None and token.tag == PERSON


def _extend_name(text: str, start: int, word: str, surname: int) -> str:
    """Extend ``word`` (a surname, or a name cut short: 胡玉|萱) by the characters up to a
    name-ending character, keeping the given name at most two characters long."""
    for extra in range(MAX_GIVEN_NAME_LENGTH - (len(word) - surname), 0, -1):
        end = start + len(word) + extra
        after = text[end:end + 1]
        if end <= len(text) and _plausible_given(text[start + len(word):end]) and (not after or after in NAME_END_CHARS
                                                                                       or _TITLE_RE.match(text, end)):
            return text[start:end]
    return word


def _strip_title(text: str, start: int, end: int) -> int:
    """End of the name inside ``text[start:end]`` once a trailing title is cut off."""
    for m in _TITLE_RE.finditer(text, start, end):
        if m.end() == end and m.start() > start:
            return m.start()
    return end


def _tagger_names(text: str, tokens: Sequence[Token], anchors: frozenset[int]) -> list[Span]:
    """Person tokens of the tagger (adjacent ones merged), checked and, when cut short, completed.

    ``anchors`` are the positions right after a context word (``患者``, ``我叫`` ...). A two-character
    name with no context word before it and no title after it must not be followed by a noun, number
    or adjective, or by a digit (``黄染4天``, ``李乐钙片``: a surname character + one character before
    a noun or a number is usually a word, not a name).
    """
    spans: list[Span] = []
    next_tag = {t.start: t.tag for t in tokens}
    i = 0
    while i < len(tokens):
        if tokens[i].tag != PERSON:
            i += 1
            continue
        start, end = tokens[i].start, tokens[i].end
        while i + 1 < len(tokens) and tokens[i + 1].tag == PERSON and tokens[i + 1].start == end:
            i += 1
            end = tokens[i].end
        i += 1
        end = _strip_title(text, start, end)
        word = text[start:end]
        surname = surname_length(word)
        if not surname or word in name_stopwords():
            continue
        if len(word) == surname:  # a lone surname: before a title (policy) or the tagger cut the name short
            if _TITLE_RE.match(text, end):
                spans.append(Span(start, end, "NAME", word))
                continue
            word = _extend_name(text, start, word, surname)
        end = start + len(word)
        bare = start not in anchors and not _TITLE_RE.match(text, end)
        if bare and len(word) == NAME_LENGTHS[0] and (next_tag.get(end) in NOUN_LIKE_TAGS or text[end:end + 1].isdigit()):
            continue
        if valid_name(word) and not _fused(text, start, end):
            spans.append(Span(start, end, "NAME", word))
    return spans


def _fused(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` is the inside of a longer dictionary word (卡|马西平, 肩|周炎)."""
    for before in (1, 2):
        if start - before >= 0 and re.fullmatch(f"[{CJK}]+", text[start - before:start]) \
                and in_dictionary(text[start - before:end]):
            return True
    return end < len(text) and in_dictionary(text[start:end + 1])


def _surname_stands_alone(start: int, surname: int, bounds: _Boundaries) -> bool:
    """The tagger reads the surname at ``start`` as its own word (or as the start of a name), not as
    part of a word (严格|按) or as a function word (和|面诊)."""
    token = bounds.by_start.get(start)
    return token is not None and (token.tag == PERSON or (token.end == start + surname and token.tag not in FUNCTION_TAGS))


def _one_token(start: int, end: int, bounds: _Boundaries) -> bool:
    """The tagger reads ``text[start:end]`` as one named entity (``潘超|医生``, tagged as an organisation),
    not as a common noun (``管床|医生``)."""
    token = bounds.by_start.get(start)
    return token is not None and token.end == end and token.tag in ENTITY_TAGS


def _name_after(text: str, pos: int, bounds: _Boundaries) -> str | None:
    """A name the tagger missed right after a context word: a surname plus one or two plausible
    given-name characters ending at a word boundary and before punctuation or a clause word."""
    window = text[pos:pos + NAME_WINDOW]
    surname = surname_length(window)
    if not surname:
        return None
    word = _extend_name(text, pos, text[pos:pos + surname], surname)
    # a compound surname after a context word is a name even where the tagger split it (令|狐秋菊)
    if len(word) > surname and bounds.aligned(pos, pos + len(word)) and valid_name(word) \
            and (surname == COMPOUND_SURNAME_LENGTH or _surname_stands_alone(pos, surname, bounds)):
        return word
    return None


def _name_before(text: str, end: int, bounds: _Boundaries) -> str | None:
    """The 3- or 2-character name ending at ``end`` (where a title starts) that the tagger missed."""
    for length in reversed(NAME_LENGTHS):
        start = end - length
        if start < 0:
            continue
        tail = text[start:end]
        surname = surname_length(tail)
        if surname and surname < length and _plausible_given(tail[surname:]) and valid_name(tail) \
                and bounds.aligned(start, end) and (_surname_stands_alone(start, surname, bounds)
                                                    or _one_token(start, end, bounds)):
            return tail
    return None


def _surname_titles(text: str, bounds: _Boundaries) -> list[Span]:
    """The surname + title policy: ``赵医生`` -> the surname ``赵``, when it is a word of its own."""
    spans = []
    for m in _TITLE_RE.finditer(text):
        for length in (2, 1):
            start = m.start() - length
            word = text[max(start, 0):m.start()]
            if start < 0 or word not in surnames():
                continue
            token = bounds.by_start.get(start)
            # the surname is a word of its own, or the tagger read surname + title as one word (陆大夫)
            own_word = token is not None and (token.tag == PERSON or (
                token.end in (m.start(), m.end()) and m.start() in bounds.edges | {token.start + length}
                and token.tag not in FUNCTION_TAGS))
            if own_word:
                spans.append(Span(start, m.start(), "NAME", word))
            break
    return spans


def has_name_context(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` follows a context word (``患者``, ``我叫``, ``主治医生：`` ...) or is
    followed by a title (``医生``, ``女士`` ...): the text itself says a person is named there."""
    after_prefix = any((m := _NAME_PREFIX_RE.match(text, pos, start + 1)) is not None and m.end() == start
                       for pos in range(max(0, start - _LONGEST_PREFIX), start))
    return after_prefix or _TITLE_RE.match(text, end) is not None


def _latin_names(text: str) -> list[Span]:
    """Pinyin names (``Zhang Wei``, ``Wei Zhang``, ``LIU Yang``) and surnames after ``Dr.`` / ``Mr.``."""
    spans = []
    family = pinyin_surnames()
    for m in _LATIN_NAME_RE.finditer(text):
        first, second = m.group("first").lower(), m.group("second").lower().replace("-", "")
        if (first in family and _GIVEN_PINYIN_RE.fullmatch(second)) or (second in family and _GIVEN_PINYIN_RE.fullmatch(first)):
            spans.append(Span(m.start(), m.end(), "NAME", m.group()))
    for m in _LATIN_TITLE_RE.finditer(text):
        if m.group("name").lower() in family:
            spans.append(Span(m.start("name"), m.end("name"), "NAME", m.group("name")))
    return spans


def find_names(text: str, tokens: Sequence[Token]) -> list[Span]:
    """Every person name in ``text`` (see the module docstring); ``tokens`` come from the tagger."""
    bounds = _Boundaries(tokens)
    prefixes = list(_NAME_PREFIX_RE.finditer(text))
    spans = _tagger_names(text, tokens, frozenset(m.end() for m in prefixes))
    for m in prefixes:
        name = _name_after(text, m.end(), bounds)
        if name:
            spans.append(Span(m.end(), m.end() + len(name), "NAME", name))
    for m in _SUFFIX_NAME_RE.finditer(text):
        name = _name_before(text, m.end(1), bounds)
        if name:
            spans.append(Span(m.end(1) - len(name), m.end(1), "NAME", name))
    for m in _MASKED_NAME_RE.finditer(text):
        start = m.start()
        if start >= 2 and text[start - 2:start] in surnames():
            start -= 2
        elif start >= 1 and text[start - 1] in surnames():
            start -= 1
        else:
            continue
        spans.append(Span(start, m.end(), "NAME", text[start:m.end()]))
    spans += _surname_titles(text, bounds)
    spans += _latin_names(text)
    return spans
