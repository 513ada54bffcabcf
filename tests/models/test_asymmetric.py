import json

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from care.errors import CareError, DimensionMismatchError
from care.models.asymmetric import (
    CARE_CONFIG_FILENAME,
    build_care_model,
    load_care_model,
    read_care_config,
    save_care_model,
    split_care_model,
)
from care.models.document import build_document_encoder
from care.models.instructions import RERANK_INSTRUCTION, RETRIEVAL_INSTRUCTION, instructions_from_prompts
from care.models.lora import LoraSettings
from care.models.query import build_query_encoder

QUERIES = ["头痛怎么办", "高血压吃什么药？"]
DOCS = ["多休息，必要时服用止痛药。", "遵医嘱服用降压药，并低盐饮食。"]
SMALL_LORA = LoraSettings(r=4, alpha=8, dropout=0.0)


@pytest.fixture()
def towers(tiny_query_dir, tiny_document_dir, perturb_lora):
    query = build_query_encoder(tiny_query_dir)
    document = build_document_encoder(tiny_document_dir, lora=SMALL_LORA, output_dim=query.get_embedding_dimension())
    perturb_lora(document)
    return query, document


@pytest.fixture()
def care(towers):
    return build_care_model(*towers)


def test_width_is_derived_from_the_query_encoder_and_recorded(care):
    config = care.care_config
    assert (config.query_dim, config.document_native_dim, config.output_dim) == (64, 128, 64)
    assert (config.query_pooling, config.document_pooling) == ("cls", "lasttoken")
    assert config.lora["r"] == 4 and config.lora["alpha"] == 8
    assert care.get_embedding_dimension() == 64


def test_dimension_mismatch_is_a_clear_error(tiny_query_dir, tiny_document_dir):
    query = build_query_encoder(tiny_query_dir)
    document = build_document_encoder(tiny_document_dir)  # 128-d, no Matryoshka cut
    with pytest.raises(DimensionMismatchError, match="output_dim=64"):
        build_care_model(query, document)


def test_routes_and_instructions_apply_to_queries_only(care, towers):
    query, document = towers
    prefix = f"Instruct: {RETRIEVAL_INSTRUCTION}\nQuery: "
    np.testing.assert_allclose(care.encode_query(QUERIES), query.encode([prefix + q for q in QUERIES]), atol=1e-6)
    np.testing.assert_allclose(care.encode_document(DOCS), document.encode(DOCS), atol=1e-6)
    rerank = care.encode_query(QUERIES, prompt_name="CMedQAv1-reranking-query")
    np.testing.assert_allclose(
        rerank, query.encode([f"Instruct: {RERANK_INSTRUCTION}\nQuery: {q}" for q in QUERIES]), atol=1e-6
    )
    assert care.prompts["document"] == ""
    assert all(key in ("query", "document") or key.endswith("-query") for key in care.prompts)


def test_saved_folder_loads_with_plain_sentence_transformer(care, tmp_path):
    queries, docs = care.encode_query(QUERIES), care.encode_document(DOCS)
    for merge in (False, True):
        path = save_care_model(care, tmp_path / f"care-{merge}", merge_lora=merge)
        loaded = SentenceTransformer(str(path))
        np.testing.assert_allclose(loaded.encode_query(QUERIES), queries, atol=1e-6)
        np.testing.assert_allclose(loaded.encode_document(DOCS), docs, atol=1e-5)
        recorded = json.loads((path / CARE_CONFIG_FILENAME).read_text())
        assert recorded["output_dim"] == 64 and recorded["lora"]["r"] == 4
        assert (recorded["lora_adapter"] is None) == merge


def test_resume_lora_from_a_care_folder(care, tmp_path):
    docs = care.encode_document(DOCS)
    path = save_care_model(care, tmp_path / "care")
    resumed = load_care_model(path, resume_lora=True)
    _, document = split_care_model(resumed)
    trainable = [name for name, p in document.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    np.testing.assert_allclose(resumed.encode_document(DOCS), docs, atol=1e-5)
    # saving the resumed model again and reloading keeps the vectors (no drift through merge/unmerge)
    again = save_care_model(resumed, tmp_path / "care")
    np.testing.assert_allclose(SentenceTransformer(str(again)).encode_document(DOCS), docs, atol=1e-5)

    merged_only = save_care_model(care, tmp_path / "merged", merge_lora=True)
    with pytest.raises(CareError, match="keeps no LoRA adapter"):
        load_care_model(merged_only, resume_lora=True)


def test_split_towers_share_parameters_and_recombine(care):
    query, document = split_care_model(care)
    assert query.get_embedding_dimension() == document.get_embedding_dimension() == 64
    assert next(query.parameters()) is next(care[0].sub_modules["query"].parameters())
    again = build_care_model(query, document, prompts=instructions_from_prompts(care.prompts))
    assert again.prompts == care.prompts
    np.testing.assert_allclose(again.encode_query(QUERIES), care.encode_query(QUERIES), atol=1e-6)


def test_load_rejects_folders_that_are_not_care_models(tmp_path, tiny_query_dir, care):
    with pytest.raises(CareError, match="does not exist"):
        load_care_model(tmp_path / "missing")
    plain = tmp_path / "plain"
    build_query_encoder(tiny_query_dir).save(str(plain))
    with pytest.raises(CareError, match="care_config.json is missing"):
        load_care_model(plain)
    path = save_care_model(care, tmp_path / "care")
    data = json.loads((path / CARE_CONFIG_FILENAME).read_text())
    (path / CARE_CONFIG_FILENAME).write_text(json.dumps({**data, "output_dim": 32}))
    with pytest.raises(DimensionMismatchError, match="output_dim=32"):
        load_care_model(path)
    (path / CARE_CONFIG_FILENAME).write_text(json.dumps({**data, "colour": "red"}))
    with pytest.raises(CareError, match="unknown field"):
        read_care_config(path)


@pytest.mark.filterwarnings("ignore:Task name .* is not valid")
def test_mteb_evaluates_a_saved_folder_through_the_right_routes(care, tmp_path):
    mteb = pytest.importorskip("mteb")
    from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    model = load_care_model(save_care_model(care, tmp_path / "care", merge_lora=True))
    calls = []
    for route in ("query", "document"):
        original = getattr(model, f"encode_{route}")

        def spy(*args, _route=route, _original=original, **kwargs):
            calls.append((_route, kwargs.get("prompt")))
            return _original(*args, **kwargs)

        setattr(model, f"encode_{route}", spy)
    results = mteb.evaluate(SentenceTransformerEncoderWrapper(model), [MockRetrievalTask()], cache=None)
    assert not results.exceptions and 0.0 <= results.task_results[0].get_score() <= 1.0
    prefix = f"Instruct: {RETRIEVAL_INSTRUCTION}\nQuery: "
    assert ("query", prefix) in calls and ("document", "") in calls
    assert all(prompt == "" for route, prompt in calls if route == "document")
