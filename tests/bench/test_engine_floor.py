"""The engine's floor graph: no transformer layer, 8 wide, tokenising exactly as the model it stands beside (its
tokenizer, prompt, instruction template and truncation), loaded in that model's engine."""

from __future__ import annotations

import json

import pytest

from care.bench.engine_floor import FLOOR_WIDTH, floor_encoder, text_settings
from care.errors import CareError

TEXTS = ["高血压吃什么药", "糖尿病饮食要注意什么", "感冒发烧多喝水"]
PROMPT = "查询: "


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny BERT's query side with a query prefix, in PyTorch and exported to ONNX int8."""
    from care.encoders.onnx import OnnxQueryEncoder
    from care.encoders.sides import load_side
    from care.models.onnx_export import export_query_encoder
    from care.models.presets import make_tiny_models

    root = tmp_path_factory.mktemp("floor")
    bert, _ = make_tiny_models(TEXTS, root / "tiny")
    spec = f"{bert}?query_prefix=%E6%9F%A5%E8%AF%A2%3A+&max_length=24"
    export_query_encoder(spec, root / "onnx", quantize=True)
    return {"root": root, "torch": load_side(spec, "query", device="cpu", dtype="float32"),
            "onnx": OnnxQueryEncoder(root / "onnx", int8=True, threads=1)}


def _input_ids(encoder, text: str) -> list[int]:
    settings = text_settings(encoder)
    encoded = settings.tokenizer(settings.query_prompt + text, truncation=True, max_length=settings.max_length)
    return encoded["input_ids"]


@pytest.mark.parametrize("engine", ["onnx-int8", "pytorch"])
def test_the_floor_has_no_layer_and_tokenises_as_its_model(tiny, engine):
    from care.encoders.onnx import OnnxQueryEncoder

    reference = tiny["onnx"] if engine == "onnx-int8" else tiny["torch"]
    floor = floor_encoder(reference, engine, tiny["root"] / f"floor-{engine}")
    config = json.loads((tiny["root"] / f"floor-{engine}" / "model" / "config.json").read_text(encoding="utf-8"))
    assert (config["num_hidden_layers"], config["hidden_size"]) == (0, FLOOR_WIDTH)
    ours, theirs = text_settings(floor), text_settings(reference)
    assert (ours.query_prompt, ours.max_length, ours.instructions) == (PROMPT, 24, True) == \
        (theirs.query_prompt, theirs.max_length, theirs.instructions)
    assert ours.instruction_template == theirs.instruction_template
    for text in TEXTS:
        assert _input_ids(floor, text) == _input_ids(reference, text)
    assert isinstance(floor, OnnxQueryEncoder) == (engine == "onnx-int8")
    if engine == "onnx-int8":
        assert floor.int8 and floor.threads == 1
    vectors = floor.encode_queries(TEXTS[:1], instruction="找答案", batch_size=1)
    assert vectors.shape == (1, FLOOR_WIDTH)


def test_a_floor_needs_a_known_engine_and_encoder(tiny):
    with pytest.raises(CareError, match="unknown latency engine 'tensorrt'"):
        floor_encoder(tiny["onnx"], "tensorrt", tiny["root"] / "x")
    with pytest.raises(CareError, match="no floor graph for object"):
        floor_encoder(object(), "pytorch", tiny["root"] / "y")
