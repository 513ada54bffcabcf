"""MemoEncoder: each text encoded once per role, the memo saved and reloaded."""

from __future__ import annotations

import numpy as np

from care.encoders.hashing import HashingCharEncoder
from care.encoders.memo import MemoEncoder


def test_memo_encoder_encodes_each_text_once_and_reloads(tmp_path):
    inner = HashingCharEncoder()
    memo = MemoEncoder(inner, tmp_path / "memo.npz")
    texts = ["高血压吃什么药", "心梗的早期表现", "高血压吃什么药"]
    first = memo.encode_documents(texts)
    np.testing.assert_allclose(first, inner.encode_documents(texts))
    memo.encode_documents(texts[:2])
    assert memo.encoded == 2 and memo.fingerprint == inner.fingerprint
    memo.save()
    again = MemoEncoder(inner, tmp_path / "memo.npz")
    np.testing.assert_array_equal(again.encode_documents(texts), first)
    assert again.encoded == 0
