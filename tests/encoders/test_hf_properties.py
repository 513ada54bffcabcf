"""A tiny HF encoder on arbitrary Unicode (issue 40): both roles return one finite unit vector per text,
and the count of queries longer than the model reads is exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from care.encoders.registry import load_model

from ..hostile_text import HOSTILE_TEXTS, LONG_QUESTION_CHARS
from .conftest import MAX_POSITIONS

#: Examples per property: a tiny model encodes a batch in milliseconds.
MAX_EXAMPLES = 60
#: Tolerance on a float32 unit norm.
NORM_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def encoder(tiny_bert):
    return load_model(str(tiny_bert))


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(), min_size=1, max_size=4))
@example(texts=list(HOSTILE_TEXTS))
@example(texts=["", " ", "\x00"])
def test_any_text_encodes_in_both_roles(encoder, texts):
    for vectors in (encoder.encode_queries(texts, instruction="检索相关文档"), encoder.encode_documents(texts)):
        assert vectors.shape == (len(texts), encoder.dim) and np.isfinite(vectors).all()
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=NORM_TOLERANCE)


def test_long_queries_are_counted_against_the_tokenizer_limit(encoder):
    # the char tokenizer makes one token per character, plus [CLS] and [SEP]
    fits, over = "头" * (MAX_POSITIONS - 2), "头" * (MAX_POSITIONS - 1)
    found = encoder.long_queries([fits, over, HOSTILE_TEXTS[-1]])
    assert (found.count, found.limit, found.handling) == (2, MAX_POSITIONS, "truncated")
    assert len(HOSTILE_TEXTS[-1]) == LONG_QUESTION_CHARS
    assert encoder.long_queries([fits], instruction="检索").count == 1  # the instruction's tokens count
