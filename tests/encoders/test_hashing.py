"""The hashing char n-gram encoder: deterministic, normalised, overlap-based."""

from __future__ import annotations

import numpy as np

from care.encoders.hashing import HASHING_DIM, HashingCharEncoder


def test_vectors_are_unit_length_and_both_roles_agree() -> None:
    enc = HashingCharEncoder()
    texts = ["头痛发烧怎么办", "高血压吃什么药"]
    q, d = enc.encode_queries(texts), enc.encode_documents(texts)
    assert q.shape == (2, HASHING_DIM) and q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(q, d)


def test_shared_characters_score_higher_than_disjoint_text() -> None:
    enc = HashingCharEncoder()
    q = enc.encode_queries(["糖尿病饮食"])[0]
    near, far = enc.encode_documents(["糖尿病患者的饮食", "骨折后如何康复"])
    assert q @ near > q @ far
    assert HashingCharEncoder().fingerprint == enc.fingerprint
