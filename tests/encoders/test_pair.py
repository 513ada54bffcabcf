"""Asymmetric pairs: separate query / document towers, dimension checks, Matryoshka truncation."""

from __future__ import annotations

import numpy as np
import pytest

from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model
from care.errors import DimensionMismatchError

TEXTS = ["头痛怎么办", "感冒发热"]


def test_pair_routes_each_role_to_its_own_tower(tiny_bert, tiny_qwen3):
    pair = load_model(f"asym:{tiny_bert}?pooling=cls|{tiny_qwen3}")
    query_tower, document_tower = load_model(f"{tiny_bert}?pooling=cls"), load_model(str(tiny_qwen3))
    assert isinstance(pair, AsymmetricEncoder) and pair.dim == 32
    np.testing.assert_allclose(pair.encode_queries(TEXTS, instruction="检索"), query_tower.encode_queries(TEXTS, instruction="检索"), atol=1e-6)
    np.testing.assert_allclose(pair.encode_documents(TEXTS), document_tower.encode_documents(TEXTS), atol=1e-6)
    assert pair.fingerprint not in (query_tower.fingerprint, document_tower.fingerprint)
    swapped = load_model(f"asym:{tiny_qwen3}|{tiny_bert}?pooling=cls")
    assert swapped.fingerprint != pair.fingerprint


def test_dimension_mismatch_names_both_dims(tiny_bert, wide_qwen3):
    with pytest.raises(DimensionMismatchError, match="outputs 32-d.*outputs 48-d"):
        load_model(f"asym:{tiny_bert}|{wide_qwen3}")


def test_declared_dim_truncates_the_document_side(tiny_bert, wide_qwen3):
    query_tower, document_tower = load_model(str(tiny_bert)), load_model(str(wide_qwen3))
    pair = AsymmetricEncoder(query_tower, document_tower, dim=32)
    full = document_tower.encode_documents(TEXTS)
    expected = full[:, :32] / np.linalg.norm(full[:, :32], axis=1, keepdims=True)
    documents = pair.encode_documents(TEXTS)
    assert documents.shape == (2, 32)
    np.testing.assert_allclose(documents, expected, atol=1e-6)
    with pytest.raises(DimensionMismatchError, match="dim=16.*32-d.*48-d"):
        AsymmetricEncoder(query_tower, document_tower, dim=16)
    with pytest.raises(DimensionMismatchError, match="dim=32"):
        AsymmetricEncoder(document_tower, query_tower, dim=32)  # document side narrower than dim


def test_role_fingerprints_are_the_towers_own(tiny_bert, tiny_qwen3, wide_qwen3):
    from care.encoders.base import role_fingerprint

    query_tower, document_tower = load_model(f"{tiny_bert}?pooling=cls"), load_model(str(tiny_qwen3))
    pair = AsymmetricEncoder(query_tower, document_tower)
    # each side's cache entries are shared with the tower used alone ...
    assert role_fingerprint(pair, "query") == query_tower.fingerprint
    assert role_fingerprint(pair, "document") == document_tower.fingerprint
    # ... but a Matryoshka-cut document side is a different set of vectors
    cut = AsymmetricEncoder(query_tower, load_model(str(wide_qwen3)), dim=32)
    assert role_fingerprint(cut, "document") != load_model(str(wide_qwen3)).fingerprint
    # encoders without role fingerprints fall back to their whole-model fingerprint
    assert role_fingerprint(document_tower, "document") == document_tower.fingerprint
