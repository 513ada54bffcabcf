"""BM25 on arbitrary Unicode (issue 40): tokenising, indexing, searching and scoring never raise, and
the fallbacks of the module docstring hold: stopwords kept when nothing else is left, visible
characters when nothing word-like is left, nothing (score 0) only for a text with nothing visible."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from care.data.text_rules import is_visible
from care.encoders.bm25 import CHINESE_STOPWORDS, BM25Config, BM25Retriever, tokenize

from ..hostile_text import HOSTILE_TEXTS

CONFIGS = [BM25Config(tokenizer=tokenizer, stopwords=stopwords)
           for tokenizer in ("jieba", "char") for stopwords in ("default", "none")]
#: Every scoring variant too, for the index / search properties.
SCORING_CONFIGS = st.builds(BM25Config, tokenizer=st.sampled_from(["jieba", "char"]),
                            stopwords=st.sampled_from(["default", "none"]),
                            method=st.sampled_from(["lucene", "robertson", "atire", "bm25l", "bm25+"]))
#: Examples per property: enough to meet emoji, combining marks and zero-width characters, still seconds.
MAX_EXAMPLES = 150
#: Corpus sizes of the index / search property.
MAX_DOCS = 6
#: Hits asked per query.
K = 10

PROPERTY = settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _with_hostile_examples(test):
    for text in HOSTILE_TEXTS:
        test = example(text)(test)
    return test


def _visible(text: str) -> bool:
    return any(is_visible(char) for char in text)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.tokenizer}-{c.stopwords}")
@PROPERTY
@given(text=st.text())
@_with_hostile_examples
def test_tokenize_never_raises_and_is_empty_only_without_a_visible_character(config, text):
    tokens = tokenize(text, config)
    assert all(isinstance(token, str) and token for token in tokens)
    assert not any(char.isspace() for token in tokens for char in token)
    assert bool(tokens) == _visible(text), (text, tokens)


@pytest.mark.parametrize(("text", "tokens"), [
    ("是什么", ["是", "什么"]),                      # only stopwords: they are kept
    ("是怎么个...", ["是", "怎么", "个"]),
    ("！！！", ["!", "!", "!", "!!", "!!"]),          # nothing word-like: characters (NFKC'd) and pairs
    ("😀", ["😀"]),
    ("123", ["123"]),
    ("what is this", ["what", "is", "this"]),
    ("高血壓", ["高血壓"]),
    ("\u200b", []),                                   # nothing visible
    ("\u200b \t\ufeff", []),
])
def test_the_fallbacks_on_the_reported_texts(text, tokens):
    assert tokenize(text, BM25Config()) == tokens


def test_ordinary_text_keeps_its_tokens():
    assert tokenize("请问高血压的患者怎么办？", BM25Config()) == ["高血压", "患者", "怎么办"]
    assert tokenize("是", BM25Config(tokenizer="char")) == ["是"]  # a lone stopword is kept
    assert tokenize("头痛是", BM25Config(tokenizer="char")) == ["头", "痛", "头痛", "痛是"]  # ...not among others


def test_full_width_and_traditional_characters():
    assert tokenize("ＡＢＣ，１２３", BM25Config()) == ["abc", "123"]
    retriever = BM25Retriever(BM25Config(tokenizer="char"))
    retriever.index(["simplified", "other"], ["高血压怎么办", "糖尿病"])
    (hits,) = retriever.search(["高血壓"], k=2)
    assert [doc for doc, _ in hits] == ["simplified"]  # through the shared characters 高, 血, 高血


@PROPERTY
@given(docs=st.lists(st.text(), min_size=1, max_size=MAX_DOCS), queries=st.lists(st.text(), max_size=4),
       config=SCORING_CONFIGS)
@example(docs=["高血压怎么办", "是怎么个...", "血糖高"], queries=list(HOSTILE_TEXTS), config=CONFIGS[0])
@example(docs=["\u200b", " ", "\x00"], queries=["是什么", "\u200b"], config=CONFIGS[0])
def test_index_search_and_score_never_raise(docs, queries, config):
    retriever = BM25Retriever(config)
    ids = [f"d{i}" for i in range(len(docs))]
    retriever.index(ids, docs)
    results = retriever.search(queries, K)
    assert len(results) == len(queries)
    for query, hits in zip(queries, results):
        scores = [score for _, score in hits]
        assert len(hits) <= K and all(np.isfinite(s) and s > 0 for s in scores)
        assert scores == sorted(scores, reverse=True) and {d for d, _ in hits} <= set(ids)
        if not _visible(query):
            assert hits == []
    for query in queries:
        scores = retriever.score(query, docs)
        assert scores.dtype == np.float32 and scores.shape == (len(docs),) and np.isfinite(scores).all()
        assert (scores >= 0).all() and (_visible(query) or not scores.any())


@PROPERTY
@given(docs=st.lists(st.text(), min_size=1, max_size=MAX_DOCS), config=st.sampled_from(CONFIGS))
@example(docs=["是什么", "！！！", "😀", "什么"], config=CONFIGS[0])
def test_a_document_is_found_by_its_own_text(docs, config):
    """Tokenisation is the same on both sides, and Lucene's IDF is positive, so a text with a token
    retrieves its own document with a positive score."""
    retriever = BM25Retriever(config)
    retriever.index([str(i) for i in range(len(docs))], docs)
    for i, (doc, hits) in enumerate(zip(docs, retriever.search(docs, len(docs)))):
        assert (str(i) in {d for d, _ in hits}) == _visible(doc), (doc, hits)


def test_a_corpus_without_any_token_indexes_and_scores_zero():
    retriever = BM25Retriever()
    retriever.index(["a", "b"], ["\u200b", " \t"])
    assert retriever.search(["高血压", "\u200b"], k=5) == [[], []]
    assert retriever.score("高血压", ["\u200b"]).tolist() == [0.0]


def test_stopword_only_documents_match_stopword_only_queries():
    retriever = BM25Retriever()
    retriever.index(["ordinary", "stopwords"], ["高血压的治疗", "是怎么个..."])
    (hits,) = retriever.search(["是什么"], k=5)
    assert [doc for doc, _ in hits] == ["stopwords"]  # the ordinary document dropped its 的
    assert {"是", "什么", "怎么", "个"} <= CHINESE_STOPWORDS


def test_nfkc_keeps_visibility():
    """The tokeniser sees the NFKC'd, lower-cased text; the rule "no token only when nothing is visible"
    is stated on the text as given. They agree because no code point changes visibility under NFKC."""
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        normalised = unicodedata.normalize("NFKC", char).lower()
        assert _visible(normalised) == is_visible(char) or not normalised, (hex(code), normalised)
