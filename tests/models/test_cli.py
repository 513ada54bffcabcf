import numpy as np
from sentence_transformers import SentenceTransformer
from typer.testing import CliRunner

from care.cli import app

runner = CliRunner()


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


def test_info_on_a_folder_without_a_model_is_a_user_error(tmp_path):
    """`care model info` on a data folder (or an ONNX export) was 'unexpected ValueError: Unrecognized model'."""
    from care.errors import CareError

    data = tmp_path / "beir"
    data.mkdir()
    (data / "corpus.jsonl").write_text('{"_id": "1", "text": "头痛"}\n', encoding="utf-8")
    result = runner.invoke(app, ["model", "info", str(data)])
    assert isinstance(result.exception, CareError) and "holds no model" in str(result.exception)
    (data / "onnx_config.json").write_text("{}", encoding="utf-8")
    result = runner.invoke(app, ["model", "info", str(data)])
    assert isinstance(result.exception, CareError) and "care serve --onnx" in str(result.exception)
