"""The hashing encoder on arbitrary Unicode (issue 40): every text encodes to a unit vector, or to the
zero vector exactly when nothing in it is visible; ordinary text encodes as before."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from care.data.text_rules import is_visible
from care.encoders.hashing import HASHING_DIM, HashingCharEncoder

from ..hostile_text import HOSTILE_TEXTS

#: Examples per property (each encode is sub-millisecond).
MAX_EXAMPLES = 200
#: Tolerance on a float32 unit norm.
NORM_TOLERANCE = 1e-5

ENCODER = HashingCharEncoder()


def _with_hostile_examples(test):
    for text in HOSTILE_TEXTS:
        test = example(text)(test)
    return test


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(text=st.text())
@_with_hostile_examples
def test_any_text_encodes_to_a_unit_or_zero_vector(text):
    queries, documents = ENCODER.encode_queries([text]), ENCODER.encode_documents([text])
    assert queries.shape == (1, HASHING_DIM) and queries.dtype == np.float32 and np.isfinite(queries).all()
    np.testing.assert_array_equal(queries, documents)
    norm = float(np.linalg.norm(queries[0]))
    expected = 1.0 if any(is_visible(char) for char in text) else 0.0
    assert abs(norm - expected) < NORM_TOLERANCE, (text, norm)


def test_invisible_text_scores_zero_and_symbols_still_count():
    zero, emoji, bangs = ENCODER.encode_queries(["\u200b \ufeff\t", "😀", "！！！"])
    assert not zero.any()
    assert emoji @ ENCODER.encode_documents(["😀😀"])[0] == pytest.approx(2 / np.sqrt(5))  # grams 😀 ×2, 😀😀 ×1
    assert bangs @ ENCODER.encode_documents(["!!!"])[0] == 0  # no NFKC: full-width ！ is not !
