"""Medical words of encyclopedic text that look like person names, and the shapes that mark them.

Disease articles, herb monographs and physiology texts are full of words that start with a surname
character and that a lexical tagger reads as a person: eponyms (唐氏儿, 伏格特-小柳-原田病, 浦肯野纤维),
historic physicians cited as sources (张景岳认为, 吴鞠通著《温病条辨》), herbs and drugs (黄蜀葵, 龙胆紫)
and physiology terms (等容舒张, 舒张峰). :meth:`MedicalTerms.why_not` says why a name candidate
``text[start:end]`` is such a word, or ``None``:

1. **medical term**: it overlaps an occurrence in the text of a term of the project's lists
   (``resources/eponyms.txt``, ``physicians.txt``, ``materia_medica.txt``, ``physiology.txt``; see
   ``resources/README.md``);
2. **book title**: it lies inside ``《...》`` (``《景岳全书》``);
3. **eponym shape**: it holds or is followed by 氏 (唐氏儿, 柯蒂氏器); it is part of a hyphen-joined
   chain that ends in a disease word (``X-Y-Z病``, ``X-Y综合征``); it is followed by an eponym word
   (:data:`EPONYM_SUFFIXES`: 综合征, 病毒, 纤维, 细胞 ...); or it is followed by 病 / 症 / 征 that
   ends the word (then punctuation or a word of :data:`DISEASE_FOLLOWERS`: ``原田病是``, not ``王伟病情``);
4. **historic person**: it follows a dynasty or era word (``明代张景岳``, ``清代医家叶天士``), or is the
   author of a book (``著《``, ``所著《``, ``在《``): a public figure, not personal data;
5. **medical head**: it is three or more characters long and starts with a two-character dictionary
   word (not a name) that at least :data:`MEDICAL_HEAD_MIN_TERMS` clinical terms hold (舒张峰: 舒张,
   in 16 terms). Among jieba's three-character person-name (``nr``) words, 161 of 45,623 start so, and
   those read by hand were mostly not names either (严重性, 左心室, 呼吸科).

Inputs: the text and the candidate's offsets. The lists are loaded once per process
(:func:`load_medical_terms`); rule 5 needs the clinical lexicon's two-character word counts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from care.curate.pii.names import in_dictionary, jieba_word_tags
from care.curate.pii.rules import CJK, resource_words

#: The project's lists of protected medical words (``resources/``).
PROTECTED_LISTS: tuple[str, ...] = ("eponyms.txt", "physicians.txt", "materia_medica.txt", "physiology.txt")
#: Words that, right after a name-shaped word, make it an eponym (格林-巴利综合征, 柯萨奇病毒, 浦肯野纤维).
EPONYM_SUFFIXES: tuple[str, ...] = ("综合征", "综合症", "病毒", "纤维", "细胞", "小体", "反射", "定律", "学说",
                                    "现象", "畸形", "杆菌", "球菌", "螺旋体", "四联症", "三联征", "淋巴瘤", "肉瘤")
#: Single characters that end a disease name (原田病, 法洛四联症, 墨菲征).
DISEASE_CHARS = "病症征"
#: What may follow a disease name for rule 3 (a verb of definition, a conjunction, 的, punctuation).
DISEASE_FOLLOWERS = frozenset("是又为与和及或等患可多常属即指系的在以由")
#: Characters that join the parts of an eponym (伏格特-小柳-原田病, 冯·维勒布兰德病).
EPONYM_JOINERS = "-－‐–—·•‧・"
#: How far before and after a candidate an eponym chain is looked for (伏格特-小柳-原田病 is 10 characters;
#: a chain reaches further after its first part than before it, where only the first part lies).
CHAIN_BEFORE = 20
CHAIN_AFTER = 30
#: Dynasties and eras before a historic person (明代张景岳, 清代医家叶天士, 东汉末年张仲景).
ERA_WORDS: tuple[str, ...] = (
    "春秋", "战国", "秦代", "西汉", "东汉", "汉代", "汉朝", "东汉末年", "三国", "魏晋", "晋代", "西晋", "东晋", "南北朝",
    "隋代", "隋朝", "唐代", "唐朝", "五代", "北宋", "南宋", "宋代", "宋朝", "金代", "金元", "元代", "元朝", "明代", "明朝",
    "明末", "清代", "清朝", "清初", "清末", "民国", "近代", "古代", "古人", "历代",
)
#: Words between an era word and the name (明代著名医家张景岳).
ERA_TITLES: tuple[str, ...] = ("著名医学家", "著名医家", "医学家", "医家", "名医", "医生", "医药学家", "药学家", "温病学家", "的")
#: After a name: the author of a book (吴鞠通著《温病条辨》, 张景岳在《景岳全书》中).
_AUTHOR_RE = re.compile(r"(?:所著|所撰|著有|撰有|编著|编撰|撰写|著|撰|编|在其?(?:所著)?|于其?)《")
#: A two-character word that at least this many clinical terms hold is a medical word (rule 5). At 10,
#: 161 of jieba's 45,623 three-character person-name words start with one (read: mostly not names);
#: at 5, 335 (more real names among them: 方人智, 常有良).
MEDICAL_HEAD_MIN_TERMS = 10
#: The shortest candidate rule 5 reads (a two-character word plus a given-name character).
MEDICAL_HEAD_MIN_LENGTH = 3

_ERA_RE = re.compile(
    "(?:" + "|".join(sorted(ERA_WORDS, key=len, reverse=True)) + ")"
    + "(?:" + "|".join(sorted(ERA_TITLES, key=len, reverse=True)) + ")?$"
)
_CHAIN_RE = re.compile(
    rf"[{CJK}]{{1,8}}(?:[{EPONYM_JOINERS}][{CJK}]{{1,8}}?)+(?:综合征|综合症|[{DISEASE_CHARS}氏])"
)
_LONGEST_ERA = max(map(len, ERA_WORDS)) + max(map(len, ERA_TITLES))


class MedicalTerms:
    """The project's protected medical words and the shapes of eponyms (see the module docstring)."""

    def __init__(self, terms: frozenset[str], word_terms: Mapping[str, int] | None = None) -> None:
        """``terms``: the protected words; ``word_terms``: two-character word -> number of clinical terms
        holding it (rule 5; none given: rule 5 is off)."""
        self.terms = terms
        self.word_terms = word_terms or {}
        self._lengths = sorted({len(t) for t in terms}, reverse=True)

    def term_overlapping(self, text: str, start: int, end: int) -> str | None:
        """A protected term occurring in ``text`` that overlaps ``text[start:end]``, or None."""
        for length in self._lengths:
            for a in range(max(0, start - length + 1), min(end, len(text) - length + 1)):
                if text[a:a + length] in self.terms:
                    return text[a:a + length]
        return None

    def why_not(self, text: str, start: int, end: int) -> str | None:
        """Why ``text[start:end]`` is a medical word or a historic person rather than a person's name, or None."""
        word = text[start:end]
        term = self.term_overlapping(text, start, end)
        if term is not None:
            return f"medical term {term}"
        if _in_book_title(text, start, end):
            return "inside a book title"
        shape = _eponym_shape(text, start, end)
        if shape is not None:
            return shape
        before = text[max(0, start - _LONGEST_ERA):start]
        era = _ERA_RE.search(before)
        if era is not None:
            return f"a historic person after {era.group()}"
        if _AUTHOR_RE.match(text, end):
            return "the author of a book"
        head = word[:2]
        if len(word) >= MEDICAL_HEAD_MIN_LENGTH and self.word_terms.get(head, 0) >= MEDICAL_HEAD_MIN_TERMS \
                and in_dictionary(head) and not jieba_word_tags().get(head, "").startswith("nr"):
            return f"starts with the medical word {head}"
        return None


def _in_book_title(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` lies between an open ``《`` and its ``》``."""
    opened = text.rfind("《", 0, start)
    return opened >= 0 and text.find("》", opened, start) < 0 and text.find("》", end) >= 0


def _eponym_shape(text: str, start: int, end: int) -> str | None:
    """Rule 3 of the module docstring: why ``text[start:end]`` is (part of) an eponym, or None."""
    word = text[start:end]
    if "氏" in word[1:] or text.startswith("氏", end):
        return "an eponym with 氏"
    for m in _CHAIN_RE.finditer(text, max(0, start - CHAIN_BEFORE), min(len(text), end + CHAIN_AFTER)):
        if m.start() < end and start < m.end():
            return f"part of the eponym {m.group()}"
    for suffix in EPONYM_SUFFIXES:
        if text.startswith(suffix, end):
            return f"an eponym before {suffix}"
    if end < len(text) and text[end] in DISEASE_CHARS:
        after = text[end + 1:end + 2]
        if not after or after in DISEASE_FOLLOWERS or re.fullmatch(f"[{CJK}]", after) is None:
            return f"a disease name {word}{text[end]}"
    return None


@functools.cache
def protected_terms() -> frozenset[str]:
    """Every word of :data:`PROTECTED_LISTS`."""
    return frozenset(w for name in PROTECTED_LISTS for w in resource_words(name))


def load_medical_terms(word_terms: Mapping[str, int] | None = None) -> MedicalTerms:
    """The project's protected words, with rule 5 read from ``word_terms`` (see :class:`MedicalTerms`)."""
    return MedicalTerms(protected_terms(), word_terms)
