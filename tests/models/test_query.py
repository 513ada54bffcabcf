import numpy as np
import pytest
import torch

from care.errors import CareError
from care.models.query import build_query_encoder


def test_cls_pooling_is_hidden_state_zero_of_last_layer(tiny_query_dir):
    model = build_query_encoder(tiny_query_dir, max_seq_length=32)
    texts = ["头痛怎么办", "高血压患者应该吃什么药？"]  # different lengths: right padding in the batch
    got = model.encode(texts, convert_to_numpy=True)
    transformer = model[0]
    batch = transformer.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = transformer.auto_model(**batch).last_hidden_state[:, 0]
    expected = torch.nn.functional.normalize(hidden, dim=-1).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got.shape == (2, 64)
    assert model.get_embedding_dimension() == 64


def test_unknown_pooling_is_rejected(tiny_query_dir):
    with pytest.raises(CareError, match="pooling"):
        build_query_encoder(tiny_query_dir, pooling="max")
