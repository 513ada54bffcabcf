"""The static query tower: built from a BERT folder's embeddings, trained in torch with the lookup's math, saved as
sentence-transformers' StaticEmbedding and reloaded (by sentence-transformers and by the numpy lookup) to the same
vectors; inside a CARE Router its query route is served as the lookup."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from care.encoders.static import StaticQueryEncoder, lookup_mean
from care.errors import CareError
from care.models.static_tower import (
    WeightedStaticEmbedding,
    build_static_tower,
    idf_weights,
    random_static_tower,
    save_static_tower,
    static_rows,
    static_tower_from_model,
)

QUERIES = ["头痛怎么办", "高血压患者应该吃什么药？", "糖尿病", "hypertension 和 diabetes", "", "ＣＴ检查"]
TOLERANCE = 1e-5


def _ids(tower, texts):
    return [e.ids for e in tower.tokenizer.encode_batch(texts, add_special_tokens=False)]


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


@pytest.fixture(scope="module")
def weighted(tiny_query_dir, texts):
    """The tiny BERT's static tower, IDF-weighted over the test texts, weights made trainable and perturbed."""
    tower = static_tower_from_model(tiny_query_dir, weight_texts=texts, learn_weights=True)
    with torch.no_grad():
        tower.token_weights.mul_(torch.rand(tower.num_embeddings, generator=torch.Generator().manual_seed(0)) + 0.5)
    return tower


def test_the_torch_forward_is_the_lookups_weighted_mean(weighted) -> None:
    texts = ["query: " + q for q in QUERIES]
    torch_rows = weighted(weighted.preprocess(texts))["sentence_embedding"].detach().numpy()
    table, weights = weighted.embedding.weight.detach().numpy(), weighted.token_weights.detach().numpy()
    reference = lookup_mean(table, _ids(weighted, texts), weights)
    np.testing.assert_allclose(torch_rows, reference, atol=TOLERANCE)
    assert not np.allclose(reference, lookup_mean(table, _ids(weighted, texts)), atol=1e-3)  # the weights matter


def test_rows_and_weights_both_train(weighted) -> None:
    features = weighted.preprocess(["头痛怎么办", "糖尿病"])
    weighted(features)["sentence_embedding"].pow(2).sum().backward()
    assert weighted.embedding.weight.grad.abs().sum() > 0 and weighted.token_weights.grad.abs().sum() > 0
    weighted.zero_grad()


def test_a_text_without_tokens_gives_a_zero_vector_not_nan(weighted) -> None:
    rows = weighted(weighted.preprocess(["", "头痛"]))["sentence_embedding"].detach()
    assert torch.all(rows[0] == 0) and torch.isfinite(rows).all() and rows[1].abs().sum() > 0


def test_saved_tower_reloads_to_the_same_vectors_in_st_and_the_lookup(weighted, tmp_path) -> None:
    from sentence_transformers import SentenceTransformer

    folder = save_static_tower(weighted, tmp_path / "static", query_prefix="query: ", document_prefix="passage: ")
    modules = SentenceTransformer(str(folder), device="cpu")  # plain sentence-transformers, no remote code
    assert type(modules[0]).__name__ == "StaticEmbedding"
    lookup = StaticQueryEncoder(folder)
    queries = lookup.encode_queries(QUERIES)
    np.testing.assert_allclose(queries, modules.encode_query(QUERIES), atol=TOLERANCE)
    np.testing.assert_allclose(lookup.encode_documents(QUERIES), modules.encode_document(QUERIES), atol=TOLERANCE)
    texts = ["query: " + q for q in QUERIES]  # folding the weights into the rows keeps every unit vector
    reference = lookup_mean(weighted.embedding.weight.detach().numpy(), _ids(weighted, texts),
                            weighted.token_weights.detach().numpy())
    np.testing.assert_allclose(queries, _unit(reference), atol=TOLERANCE)
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=TOLERANCE)
    np.testing.assert_allclose(queries[0], lookup.encode_queries(QUERIES[:1])[0], atol=TOLERANCE)  # the one-query path


def test_onnxruntime_backend_gives_the_numpy_vectors(weighted, tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    folder = save_static_tower(weighted, tmp_path / "static")
    np.testing.assert_allclose(StaticQueryEncoder(folder, backend="onnxruntime").encode_queries(QUERIES),
                               StaticQueryEncoder(folder).encode_queries(QUERIES), atol=TOLERANCE)


def test_rows_are_the_embedding_layers_output_averaged_over_positions(tiny_query_dir) -> None:
    from transformers import AutoModel

    window = 5
    rows = static_rows(tiny_query_dir, position_window=window)
    embeddings = AutoModel.from_pretrained(str(tiny_query_dir)).eval().embeddings
    token = 7
    with torch.no_grad():  # the token at positions 0..window-1 through the real embedding layer (types 0)
        out = embeddings(input_ids=torch.full((1, window), token), token_type_ids=torch.zeros(1, window, dtype=torch.long))
    np.testing.assert_allclose(rows[token], out[0].mean(dim=0).numpy(), atol=TOLERANCE)
    assert rows.shape == tuple(embeddings.word_embeddings.weight.shape)


def test_idf_weights_count_texts_not_occurrences() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2, "c": 3}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    idf = idf_weights(tokenizer, ["a a a b", "a", "a b"])
    expected = np.log(4 / np.array([1, 4, 3, 1])) + 1  # df: [UNK] 0, a 3, b 2, c 0
    np.testing.assert_allclose(idf, expected, rtol=1e-6)
    with pytest.raises(CareError, match="at least one text"):
        idf_weights(tokenizer, [])


def test_build_records_how_and_unweighted_towers_average(tiny_query_dir, tmp_path) -> None:
    import json

    folder = build_static_tower(tiny_query_dir, tmp_path / "built", position_window=4, query_prefix="q: ")
    record = json.loads((folder / "care_static_tower.json").read_text(encoding="utf-8"))
    assert record["position_window"] == 4 and record["token_weights"] is None
    tower = static_tower_from_model(tiny_query_dir, position_window=4)
    expected = _unit(lookup_mean(tower.embedding.weight.detach().numpy(), _ids(tower, ["q: 头痛"])))
    np.testing.assert_allclose(StaticQueryEncoder(folder).encode_queries(["头痛"]), expected, atol=TOLERANCE)


def test_token_weights_must_match_the_table() -> None:
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    with pytest.raises(CareError, match="3 entries but the table 2 rows"):
        WeightedStaticEmbedding(tokenizer, embedding_dim=4, token_weights=np.ones(3))


def test_a_care_folder_with_a_static_query_route_serves_the_lookup(tmp_path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    from care.encoders.hf import HFEncoder
    from care.encoders.registry import load_model
    from care.encoders.sides import load_side
    from care.models import build_care_model, save_care_model
    from care.models.asymmetric import load_care_model, split_care_model
    from care.testing.tiny_model import make_tiny_care_model

    _, document = split_care_model(load_care_model(make_tiny_care_model(tmp_path / "tiny")))
    query_tokenizer = SentenceTransformer(str(tmp_path / "tiny" / "tiny-bert"), device="cpu").tokenizer
    tower = random_static_tower(query_tokenizer, document.get_embedding_dimension(), seed=1)
    query = SentenceTransformer(modules=[tower.folded(), Normalize()], device="cpu")  # sentence-transformers' own class
    care = save_care_model(build_care_model(query, document,
                                            default_prompt_name=None), tmp_path / "care-static")
    query_side = load_side(str(care), "query")
    assert isinstance(query_side, StaticQueryEncoder) and query_side.location.query_only
    model = SentenceTransformer(str(care), device="cpu")
    np.testing.assert_allclose(query_side.encode_queries(QUERIES), model.encode_query(QUERIES), atol=TOLERANCE)
    assert isinstance(load_side(str(care), "document"), HFEncoder)
    spec = load_model(f"static:{care}?backend=numpy")
    np.testing.assert_allclose(spec.encode_queries(QUERIES[:2]), query_side.encode_queries(QUERIES[:2]), atol=TOLERANCE)
    with pytest.raises(CareError, match="query route only"):
        spec.encode_documents(["头痛"])
    with pytest.raises(CareError, match="no static tower here"):
        load_model(f"static:{tmp_path / 'tiny' / 'care'}")
