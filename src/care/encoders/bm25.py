"""BM25 over Chinese text with ``bm25s``: jieba words or character uni+bigrams.

Tokenisation (what :func:`tokenize` does to every query and document):

1. Lower-case (when ``lowercase``) and Unicode NFKC-normalise, so full-width ``ＡＢＣ１２３`` and
   ``ABC123`` match.
2. ``jieba`` mode: ``jieba.lcut`` in precise mode (``cut_all=False``) — one segmentation, no
   overlapping words. ``char`` mode: the text is split into units — each CJK character alone,
   each run of Latin letters / digits as one unit — and the tokens are every unit (unigram) plus
   every pair of adjacent units (bigram) inside a stretch without punctuation or spaces.
3. Punctuation, symbols and whitespace are dropped (Unicode categories P*, S*, Z*, C*); bigrams
   never span them.
4. With ``stopwords="default"`` the function words in :data:`CHINESE_STOPWORDS` are dropped
   (unigrams / words only; bigrams that contain them are kept). Negations (``不``, ``没有``) are
   deliberately not stopwords. ``stopwords="none"`` keeps all.

Scoring is ``bm25s`` with the Lucene BM25 variant (``k1``, ``b`` configurable); a query term not in
the corpus vocabulary scores 0, and documents with score 0 are not returned by :meth:`search`.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from care.config import Config
from care.encoders.fingerprint import digest
from care.errors import CareError

logger = logging.getLogger(__name__)

TokenizerName = Literal["jieba", "char"]

#: Frequent Chinese function words that carry no topical meaning (dropped with ``stopwords="default"``).
CHINESE_STOPWORDS: frozenset[str] = frozenset(
    "的 了 是 在 和 与 及 或 等 也 都 就 而 又 这 那 之 其 把 被 对 从 为 以 于 吧 吗 呢 啊 呀 哦 嗯 着 过 个 "
    "我 你 他 她 它 我们 你们 他们 请问 一下 一个 什么 怎么 怎样 如何 哪些 可以 很 还".split()
)
_DROPPED_CATEGORIES = ("P", "S", "Z", "C")


def _is_separator(char: str) -> bool:
    return unicodedata.category(char)[0] in _DROPPED_CATEGORIES


def _is_cjk(char: str) -> bool:
    return unicodedata.name(char, "").startswith(("CJK UNIFIED", "CJK COMPATIBILITY"))


def _char_units(text: str) -> list[list[str]]:
    """Split into stretches (between punctuation/space) of units: one CJK char, or a Latin/digit run."""
    stretches: list[list[str]] = [[]]
    word = ""
    for char in text:
        if _is_separator(char):
            if word:
                stretches[-1].append(word)
                word = ""
            stretches.append([])
        elif _is_cjk(char):
            if word:
                stretches[-1].append(word)
                word = ""
            stretches[-1].append(char)
        else:
            word += char
    if word:
        stretches[-1].append(word)
    return [stretch for stretch in stretches if stretch]


@dataclass
class BM25Config(Config):
    """Settings of a :class:`BM25Retriever`.

    Attributes:
        tokenizer: ``jieba`` (words) or ``char`` (character unigrams + bigrams).
        k1: term-frequency saturation.
        b: document-length normalisation.
        method: ``bm25s`` scoring variant (``lucene``, ``robertson``, ``atire``, ``bm25l``, ``bm25+``).
        stopwords: ``default`` drops :data:`CHINESE_STOPWORDS`; ``none`` keeps every token.
        lowercase: lower-case before tokenising.
    """

    PARSE_STRINGS = True  # spec options arrive as text: PATH?max_length=512
    KEY_NOUN = "option"

    tokenizer: TokenizerName = "jieba"
    k1: float = 1.5
    b: float = 0.75
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stopwords: Literal["default", "none"] = "default"
    lowercase: bool = True


def tokenize(text: str, config: BM25Config) -> list[str]:
    """Tokens of ``text`` as described in the module docstring."""
    text = unicodedata.normalize("NFKC", text)
    if config.lowercase:
        text = text.lower()
    stop = CHINESE_STOPWORDS if config.stopwords == "default" else frozenset()
    if config.tokenizer == "jieba":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        words = (word.strip() for word in jieba.lcut(text, cut_all=False))
        return [w for w in words if w and not all(_is_separator(c) for c in w) and w not in stop]
    tokens: list[str] = []
    for units in _char_units(text):
        tokens.extend(unit for unit in units if unit not in stop)
        tokens.extend(a + b for a, b in zip(units, units[1:]))
    return tokens


class BM25Retriever:
    """BM25 behind the :class:`~care.encoders.base.LexicalRetriever` protocol.

    Call :meth:`index` once with the corpus, then :meth:`search`; :meth:`score` ranks an ad-hoc
    candidate list (its IDF statistics come from those candidates alone).
    """

    def __init__(self, config: BM25Config | None = None, *, name: str | None = None) -> None:
        self.config = config or BM25Config()
        self.name = name or ("bm25" if self.config.tokenizer == "jieba" else "bm25-char")
        self._doc_ids: list[str] = []
        self._model: Any = None

    @property
    def fingerprint(self) -> str:
        """Hash of the BM25 settings (there are no weights)."""
        return digest({"kind": "bm25", **self.config.to_dict()})

    def _build(self, texts: Sequence[str]) -> Any:
        import bm25s

        # bm25s pins its logger at DEBUG on import; defer to the application's level instead.
        logging.getLogger("bm25s").setLevel(logging.NOTSET)
        model = bm25s.BM25(k1=self.config.k1, b=self.config.b, method=self.config.method)
        model.index([tokenize(text, self.config) for text in texts], show_progress=False)
        return model

    def index(self, doc_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Build the index over ``texts`` (parallel to ``doc_ids``)."""
        if len(doc_ids) != len(texts):
            raise CareError(f"index: {len(doc_ids)} document ids but {len(texts)} texts")
        if not texts:
            raise CareError("index: the corpus is empty")
        self._doc_ids = list(doc_ids)
        self._model = self._build(texts)
        logger.info("%s: indexed %d documents", self.name, len(texts))

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Per query, up to ``k`` ``(doc_id, score)`` pairs with score > 0, best first (ties by corpus order)."""
        if self._model is None:
            raise CareError(f"{self.name}: call index(doc_ids, texts) before search()")
        results = []
        for query in queries:
            scores = self._model.get_scores(tokenize(query, self.config))
            order = np.argsort(-scores, kind="stable")[:k]
            results.append([(self._doc_ids[i], float(scores[i])) for i in order if scores[i] > 0])
        return results

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """BM25 scores of ``query`` against each of ``texts`` (IDF from ``texts``), float32."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(self._build(texts).get_scores(tokenize(query, self.config)), dtype=np.float32)

    def __repr__(self) -> str:
        return f"BM25Retriever(name={self.name!r}, tokenizer={self.config.tokenizer!r}, docs={len(self._doc_ids)})"
