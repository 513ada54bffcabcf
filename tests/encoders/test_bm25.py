"""BM25 over jieba words and character n-grams on a hand-made Chinese example."""

from __future__ import annotations

import numpy as np
import pytest

from care.encoders.base import LexicalRetriever
from care.encoders.bm25 import BM25Config, BM25Retriever, tokenize
from care.encoders.registry import load_model
from care.errors import CareError

DOC_IDS = ["hypertension", "cold", "diabetes", "football"]
DOCS = [
    "高血压患者需要长期服用降压药，并定期监测血压。",
    "感冒引起的发热和咳嗽，一般多喝水、注意休息即可。",
    "糖尿病患者应控制饮食，监测血糖，必要时注射胰岛素。",
    "昨晚的足球比赛非常精彩，主队最终取得了胜利。",
]


@pytest.mark.parametrize("spec", ["bm25", "bm25:char"])
def test_the_obviously_matching_document_ranks_first(spec):
    retriever = load_model(spec)
    assert isinstance(retriever, LexicalRetriever)
    retriever.index(DOC_IDS, DOCS)
    results = retriever.search(["高血压应该吃什么降压药？", "感冒发热咳嗽怎么办", "血糖高的糖尿病人怎么控制饮食"], k=3)
    assert [hits[0][0] for hits in results] == ["hypertension", "cold", "diabetes"]
    for hits in results:
        scores = [score for _, score in hits]
        assert scores == sorted(scores, reverse=True) and all(score > 0 for score in scores)
        assert len(hits) <= 3


def test_search_drops_zero_scores_and_needs_an_index():
    retriever = BM25Retriever()
    with pytest.raises(CareError, match="index"):
        retriever.search(["头痛"], k=5)
    retriever.index(DOC_IDS, DOCS)
    assert retriever.search(["量子计算"], k=5) == [[]]
    with pytest.raises(CareError, match="2 document ids but 1 texts"):
        retriever.index(["a", "b"], ["x"])


def test_score_ranks_an_ad_hoc_candidate_list():
    scores = BM25Retriever().score("糖尿病 胰岛素", DOCS)
    assert scores.dtype == np.float32 and scores.shape == (len(DOCS),)
    assert int(np.argmax(scores)) == 2 and scores[3] == 0


def test_char_tokens_are_unigrams_plus_bigrams_within_punctuation():
    tokens = tokenize("头痛，发热ABC 12", BM25Config(tokenizer="char", stopwords="none"))
    assert tokens == ["头", "痛", "头痛", "发", "热", "abc", "发热", "热abc", "12"]


def test_stopwords_and_punctuation_are_dropped():
    words = tokenize("请问高血压的患者怎么办？！", BM25Config())
    assert "的" not in words and "请问" not in words and not any(w in "？！" for w in words)
    assert "高血压" in words
    kept = tokenize("高血压的患者", BM25Config(stopwords="none"))
    assert "的" in kept
    assert tokenize("ＡＢＣ１２３", BM25Config()) == tokenize("abc123", BM25Config())  # NFKC + lower-case


def test_fingerprint_tracks_settings_and_options_parse():
    retriever = load_model("bm25:char?k1=1.2&b=0.5")
    assert retriever.config == BM25Config(tokenizer="char", k1=1.2, b=0.5)
    assert retriever.fingerprint != load_model("bm25:char").fingerprint
    assert load_model("bm25").fingerprint == BM25Retriever().fingerprint
    with pytest.raises(CareError, match="unknown option.*valid options are: b, k1"):
        load_model("bm25?kk=1")
