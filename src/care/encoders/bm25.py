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

No text makes it fail; a text that steps 1-4 empty falls back, queries and documents alike:

5. Only stopwords left (``是什么``, a sentence ``是怎么个...``): it keeps its stopwords (as if
   ``stopwords="none"``). It then matches the documents that kept theirs for the same reason; against
   ordinary documents (stopwords dropped) it scores 0, as Elasticsearch's default
   ``zero_terms_query: none`` does.
6. Nothing word-like (``！！！``, ``😀``, ``→``): the tokens are its visible characters, each alone
   plus each adjacent pair (character uni+bigrams, symbols included; ``!!!`` ->
   ``! ! ! !! !!``). Ordinary text drops those characters, so such a query finds only documents
   that are themselves symbol-only.
7. Nothing visible (only whitespace, zero-width or control characters; :mod:`care.data.text_rules`):
   no tokens. Such a query scores 0 against every document (an empty hit list); such a document
   is indexed and matches no query term (``bm25l`` / ``bm25+`` still give it their per-term floor
   score, as they give every document). A corpus whose every document is empty has no vocabulary:
   every query scores 0.

Digits and Latin words are ordinary tokens (``123``, ``what``); traditional characters are not
mapped to simplified (NFKC leaves ``壓`` as is), so ``高血壓`` matches ``高血压`` only through their
shared characters under ``char`` tokenisation.

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
from care.data.text_rules import is_visible
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


def _visible_char_grams(text: str) -> list[str]:
    """Every visible character plus every adjacent pair of them (runs split at invisible ones)."""
    grams: list[str] = []
    run: list[str] = []
    for char in [*text, " "]:  # the trailing space closes the last run
        if is_visible(char):
            run.append(char)
            continue
        grams.extend(run)
        grams.extend(a + b for a, b in zip(run, run[1:]))
        run = []
    return grams


def _word_tokens(text: str, tokenizer: TokenizerName, stop: frozenset[str]) -> list[str]:
    """Steps 2-4 of the module docstring on normalised ``text``."""
    if tokenizer == "jieba":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        words = (word.strip() for word in jieba.lcut(text, cut_all=False))
        return [w for w in words if w and not all(_is_separator(c) for c in w) and w not in stop]
    tokens: list[str] = []
    for units in _char_units(text):
        tokens.extend(unit for unit in units if unit not in stop)
        tokens.extend(a + b for a, b in zip(units, units[1:]))
    return tokens


def tokenize(text: str, config: BM25Config) -> list[str]:
    """Tokens of ``text`` as described in the module docstring (never raises; ``[]`` only for a text
    with nothing visible)."""
    text = unicodedata.normalize("NFKC", text)
    if config.lowercase:
        text = text.lower()
    stop = CHINESE_STOPWORDS if config.stopwords == "default" else frozenset()
    tokens = _word_tokens(text, config.tokenizer, stop)
    if not tokens and stop:
        tokens = _word_tokens(text, config.tokenizer, frozenset())
    return tokens or _visible_char_grams(text)


class BM25Retriever:
    """BM25 behind the :class:`~care.encoders.base.LexicalRetriever` protocol.

    Call :meth:`index` once with the corpus, then :meth:`search`; :meth:`score` ranks an ad-hoc
    candidate list (its IDF statistics come from those candidates alone).
    """

    def __init__(self, config: BM25Config | None = None, *, name: str | None = None) -> None:
        self.config = config or BM25Config()
        self.name = name or ("bm25" if self.config.tokenizer == "jieba" else "bm25-char")
        self._doc_ids: list[str] = []
        self._model: Any = None  # None after index() too when the corpus has no token at all
        self._indexed = False

    @property
    def fingerprint(self) -> str:
        """Hash of the BM25 settings (there are no weights)."""
        return digest({"kind": "bm25", **self.config.to_dict()})

    def _build(self, texts: Sequence[str]) -> Any:
        """A ``bm25s`` index over ``texts``, or None when no text has a token (no vocabulary to index)."""
        import bm25s

        tokens = [tokenize(text, self.config) for text in texts]
        if not any(tokens):
            logger.warning("%s: none of the %d texts has a visible character; every query will score 0",
                           self.name, len(texts))
            return None
        # bm25s pins its logger at DEBUG on import; defer to the application's level instead.
        logging.getLogger("bm25s").setLevel(logging.NOTSET)
        model = bm25s.BM25(k1=self.config.k1, b=self.config.b, method=self.config.method)
        model.index(tokens, show_progress=False)
        return model

    def _scores(self, model: Any, query: str, n_docs: int) -> np.ndarray:
        """BM25 scores of ``query`` against the ``n_docs`` texts of ``model``; zeros when either side
        has no tokens (``bm25s`` cannot score an empty query or an empty vocabulary)."""
        tokens = tokenize(query, self.config)
        if model is None or not tokens:
            return np.zeros(n_docs, dtype=np.float32)
        return np.asarray(model.get_scores(tokens), dtype=np.float32)

    def index(self, doc_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Build the index over ``texts`` (parallel to ``doc_ids``)."""
        if len(doc_ids) != len(texts):
            raise CareError(f"index: {len(doc_ids)} document ids but {len(texts)} texts")
        if not texts:
            raise CareError("index: the corpus is empty")
        self._doc_ids = list(doc_ids)
        self._model = self._build(texts)
        self._indexed = True
        logger.info("%s: indexed %d documents", self.name, len(texts))

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Per query, up to ``k`` ``(doc_id, score)`` pairs with score > 0, best first (ties by corpus order)."""
        if not self._indexed:
            raise CareError(f"{self.name}: call index(doc_ids, texts) before search()")
        results = []
        for query in queries:
            scores = self._scores(self._model, query, len(self._doc_ids))
            order = np.argsort(-scores, kind="stable")[:k]
            results.append([(self._doc_ids[i], float(scores[i])) for i in order if scores[i] > 0])
        return results

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """BM25 scores of ``query`` against each of ``texts`` (IDF from ``texts``), float32."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        return self._scores(self._build(texts), query, len(texts))

    def __repr__(self) -> str:
        return f"BM25Retriever(name={self.name!r}, tokenizer={self.config.tokenizer!r}, docs={len(self._doc_ids)})"
