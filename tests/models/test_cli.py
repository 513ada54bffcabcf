import json

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from typer.testing import CliRunner

from care.cli import app
from care.data.errors import DataFormatError
from care.models.cli import iter_training_texts

runner = CliRunner()


def test_texts_from_jsonl_and_txt(tmp_path):
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text(
        json.dumps({"query": "头痛", "pos": ["多休息"], "neg": ["吃糖"]}, ensure_ascii=False) + "\n"
        + json.dumps({"text": "高血压"}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    assert list(iter_training_texts(jsonl)) == ["头痛", "多休息", "吃糖", "高血压"]
    txt = tmp_path / "texts.txt"
    txt.write_text("胃痛\n\n反酸\n", encoding="utf-8")
    assert list(iter_training_texts(txt)) == ["胃痛", "反酸"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "好"}\n{"id": "3"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 2"):
        list(iter_training_texts(bad))


def test_init_tiny_build_and_info(tmp_path, texts):
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(texts), encoding="utf-8")
    result = runner.invoke(app, ["model", "init-tiny", "--texts", str(corpus), "--output", str(tmp_path / "tiny")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "care"
    result = runner.invoke(app, [
        "model", "build", "--query", str(tmp_path / "tiny" / "tiny-bert"),
        "--document", str(tmp_path / "tiny" / "tiny-qwen3"), "--output", str(out), "--lora-r", "4", "--lora-alpha", "8",
    ])
    assert result.exit_code == 0, result.output
    model = SentenceTransformer(str(out))
    assert model.encode_query(["头痛"]).shape == (1, 64) and model.encode_document(["多休息"]).shape == (1, 64)
    assert np.isclose(np.linalg.norm(model.encode_document(["多休息"])), 1.0, atol=1e-5)
    result = runner.invoke(app, ["model", "info", str(out)])
    assert result.exit_code == 0, result.output
    assert "output width (Matryoshka):  64" in result.output and "'r': 4" in result.output
