"""ONNX export of the query encoder: vectors match PyTorch (fp32 within 1e-4 cosine, int8 within INT8_MIN_COSINE)."""

from __future__ import annotations

import numpy as np
import pytest

from care.encoders.onnx import FP32_MAX_COSINE_GAP, INT8_MIN_COSINE, OnnxQueryEncoder, cosine_agreement
from care.encoders.sides import load_side
from care.errors import CareError
from care.models.onnx_export import export_query_encoder

TEXTS = ["头痛", "高血压患者应该吃什么药？血压150/95需要治疗吗", "CT 肺结节", "糖尿病饮食注意事项：少吃糖，多运动。" * 3]


@pytest.fixture(scope="module")
def exported(tiny_care, tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    export_query_encoder(str(tiny_care), folder, quantize=True)
    return folder


@pytest.fixture(scope="module")
def torch_query(tiny_care):
    return load_side(str(tiny_care), "query", device="cpu", dtype="float32")


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_fp32_onnx_matches_pytorch(exported, torch_query, batch_size):
    onnx = OnnxQueryEncoder(exported)
    for instruction in (None, "Retrieve medical answers"):
        reference = torch_query.encode_queries(TEXTS, instruction=instruction)
        got = onnx.encode_queries(TEXTS, instruction=instruction, batch_size=batch_size)
        assert got.shape == reference.shape and got.dtype == np.float32
        assert cosine_agreement(reference, got).min() >= 1 - FP32_MAX_COSINE_GAP
        assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_onnx_keeps_the_spec_query_prefix(tiny_care, tmp_path):
    """A ``?query_prefix=`` option (e5 students: ``query: ``) is part of the exported encoder."""
    spec = f"{tiny_care}?query_prefix=query%3A%20"
    export_query_encoder(spec, tmp_path, quantize=False)
    onnx = OnnxQueryEncoder(tmp_path)
    assert onnx.config.query_prompt == "query: "
    reference = load_side(spec, "query", device="cpu", dtype="float32").encode_queries(TEXTS)
    assert cosine_agreement(reference, onnx.encode_queries(TEXTS)).min() >= 1 - FP32_MAX_COSINE_GAP
    unprefixed = load_side(str(tiny_care), "query", device="cpu", dtype="float32").encode_queries(TEXTS)
    assert cosine_agreement(unprefixed, onnx.encode_queries(TEXTS)).min() < 1 - FP32_MAX_COSINE_GAP


def test_onnx_export_keeps_instructions_false(tiny_care, tmp_path):
    spec = f"{tiny_care}?query_prefix=query%3A%20&instructions=false"
    export_query_encoder(spec, tmp_path, quantize=False)
    onnx = OnnxQueryEncoder(tmp_path)
    assert onnx.config.instructions is False
    reference = load_side(spec, "query", device="cpu", dtype="float32").encode_queries(TEXTS)
    got = onnx.encode_queries(TEXTS, instruction="Retrieve medical answers")
    assert cosine_agreement(reference, got).min() >= 1 - FP32_MAX_COSINE_GAP


def test_int8_onnx_is_close_to_pytorch(exported, torch_query):
    reference = torch_query.encode_queries(TEXTS)
    got = OnnxQueryEncoder(exported, int8=True).encode_queries(TEXTS)
    assert cosine_agreement(reference, got).min() >= INT8_MIN_COSINE
    assert (exported / "model.int8.onnx").stat().st_size < (exported / "model.onnx").stat().st_size


def test_onnx_model_spec_loads_the_export_and_pairs_with_a_document_encoder(exported, torch_query, tiny_care):
    from care.encoders.registry import load_model

    int8 = load_model(f"onnx:{exported}?int8=true&threads=1")
    assert isinstance(int8, OnnxQueryEncoder) and int8.int8
    assert np.allclose(int8.encode_queries(TEXTS), OnnxQueryEncoder(exported, int8=True).encode_queries(TEXTS))
    pair = load_model(f"asym:onnx:{exported}|{tiny_care}")
    reference = torch_query.encode_queries(TEXTS)
    assert cosine_agreement(reference, pair.encode_queries(TEXTS)).min() >= 1 - FP32_MAX_COSINE_GAP
    assert pair.encode_documents(TEXTS[:2]).shape == (2, pair.dim)
    with pytest.raises(CareError, match="int8"):
        load_model(f"onnx:{exported}?int8=maybe")
    with pytest.raises(CareError, match="not an ONNX export"):
        load_model(f"onnx:{tiny_care}")


def test_onnx_export_refuses_documents_and_bad_folders(exported, tmp_path):
    with pytest.raises(CareError, match="only the query encoder"):
        OnnxQueryEncoder(exported).encode_documents(["x"])
    with pytest.raises(CareError, match="not an ONNX export"):
        OnnxQueryEncoder(tmp_path)


def test_service_runs_on_the_onnx_encoder(flat_index, exported, engine):
    from care.serve.engine import load_engine

    onnx_engine = load_engine(flat_index, onnx_dir=exported)
    assert onnx_engine.model_matches_index
    for query in ("头痛怎么办", "高血压吃什么药"):
        (torch_hits,) = engine.search_vectors([query], [3], instruction=None)
        (onnx_hits,) = onnx_engine.search_vectors([query], [3], instruction=None)
        assert list(torch_hits.rows) == list(onnx_hits.rows)
        assert np.allclose(torch_hits.scores, onnx_hits.scores, atol=1e-4)
