"""int8 exports compute the same on every x86 CPU: weights fit AVX2's int16 pair sums, checked statically
and by emulating the saturating AVX2 arithmetic on the quantised graph (this machine may have VNNI)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from care.encoders.int8_portability import (
    INT16_MAX,
    MAX_PORTABLE_INT8,
    UINT8_MAX,
    emulate_avx2_u8s8,
    int8_weight_violations,
    run_onnx,
)
from care.encoders.onnx import INT8_FILE, INT8_MIN_COSINE, ONNX_FILE, OnnxQueryEncoder, cosine_agreement
from care.encoders.sides import load_side
from care.errors import CareError
from care.models.onnx_export import quantize_int8

TEXTS = ["头痛", "高血压患者应该吃什么药？血压150/95需要治疗吗", "CT 肺结节", "糖尿病饮食注意事项：少吃糖，多运动。" * 3]


@pytest.fixture(scope="module")
def exported(tiny_care, tmp_path_factory):
    from care.models.onnx_export import export_query_encoder

    folder = tmp_path_factory.mktemp("onnx")
    export_query_encoder(str(tiny_care), folder, quantize=True)
    return folder


@pytest.fixture(scope="module")
def reference(tiny_care):
    return load_side(str(tiny_care), "query", device="cpu", dtype="float32").encode_queries(TEXTS)


def _feeds(folder):
    encoder = OnnxQueryEncoder(folder)
    return encoder.feeds([encoder.config.query_prompt + t for t in TEXTS])


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_7_bit_bound_is_the_largest_that_cannot_overflow_a_pair():
    assert 2 * UINT8_MAX * MAX_PORTABLE_INT8 <= INT16_MAX < 2 * UINT8_MAX * (MAX_PORTABLE_INT8 + 1)


def test_exported_int8_weights_fit_avx2_pair_sums(exported):
    model = onnx.load(str(exported / INT8_FILE))
    assert any(n.op_type == "MatMulInteger" for n in model.graph.node)  # the check has something to check
    assert int8_weight_violations(model) == {}


def test_full_range_weights_are_reported(exported, tmp_path):
    full = tmp_path / "full.onnx"
    quantize_int8(exported / ONNX_FILE, full, reduce_range=False)
    violations = int8_weight_violations(full)
    assert violations and all(MAX_PORTABLE_INT8 < peak <= 127 for peak in violations.values())
    unsigned = tmp_path / "u8.onnx"
    quantize_int8(exported / ONNX_FILE, unsigned, reduce_range=False, weight_type="QUInt8")
    assert int8_weight_violations(unsigned) == {}  # U8U8 kernels widen to int16 before multiplying


def test_emulation_without_saturation_is_exact(exported):
    """With 7-bit weights no pair saturates, so the emulated graph must give onnxruntime's own int8 output."""
    feeds = _feeds(exported)
    native = OnnxQueryEncoder(exported, int8=True)._session.run(None, feeds)[0]
    emulated = run_onnx(emulate_avx2_u8s8(onnx.load(str(exported / INT8_FILE))), feeds)
    assert np.allclose(native, emulated, atol=1e-5)


def test_int8_export_is_close_to_pytorch_under_avx2_arithmetic(exported, reference):
    emulated = run_onnx(emulate_avx2_u8s8(onnx.load(str(exported / INT8_FILE))), _feeds(exported))
    assert cosine_agreement(reference, _unit(emulated)).min() >= INT8_MIN_COSINE


def test_emulation_reproduces_the_avx2_failure_of_full_range_weights(exported, reference, tmp_path):
    """The setting before issue 18 (8-bit signed weights) lost agreement on AVX2-only CPUs; the emulation shows it here."""
    full = tmp_path / "full.onnx"
    quantize_int8(exported / ONNX_FILE, full, reduce_range=False)
    emulated = run_onnx(emulate_avx2_u8s8(onnx.load(str(full))), _feeds(exported))
    assert cosine_agreement(reference, _unit(emulated)).min() < INT8_MIN_COSINE


def test_emulation_refuses_what_it_cannot_emulate(exported):
    model = onnx.load(str(exported / INT8_FILE))
    node = next(n for n in model.graph.node if n.op_type == "MatMulInteger")
    weight = next(i for i in model.graph.initializer if i.name == node.input[1])
    values = onnx.numpy_helper.to_array(weight)
    weight.CopyFrom(onnx.numpy_helper.from_array(values[:-1], weight.name))  # odd inner dimension
    with pytest.raises(CareError, match="even inner dimension"):
        emulate_avx2_u8s8(model)


def test_export_records_its_quantisation_settings(exported):
    from care.encoders.onnx import CONFIG_FILE
    from care.models.onnx_export import INT8_OPTIONS

    config = json.loads((exported / CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["extra"]["int8_options"] == INT8_OPTIONS
