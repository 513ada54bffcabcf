"""``care.models.onnx_export``: one export per model (again when the model is retrained in place); options and
outputs an export could not serve are refused before any work."""

from __future__ import annotations

import json

import pytest

from care.errors import CareError
from care.models.onnx_export import SOURCE_FILE, export_query_encoder, export_query_once


def test_a_model_is_exported_once_and_again_after_retraining(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights v1")
    exports = []

    def fake_export(spec, output, *, quantize=True):
        exports.append(spec)
        output.mkdir(parents=True)
        (output / "model.int8.onnx").write_bytes(b"onnx")

    monkeypatch.setattr("care.models.onnx_export.export_query_encoder", fake_export)
    spec = f"{model}?dtype=float32"
    out = export_query_once(spec, tmp_path / "onnx")
    assert exports == [spec] and json.loads((out / SOURCE_FILE).read_text())["spec"] == spec
    export_query_once(spec, out)
    assert exports == [spec]  # the same model: kept
    (model / "model.safetensors").write_bytes(b"weights v2, retrained")
    export_query_once(spec, out)
    assert exports == [spec, spec] and (out / "model.int8.onnx").is_file()  # exported again into a cleared folder


@pytest.mark.parametrize("length", [0, -1, 513])
def test_a_truncation_length_the_model_cannot_serve_is_refused(tiny_query_dir, tmp_path, length):
    """--max-seq-length 0 wrote an export that never truncated: the first query longer than the model's
    512 positions failed in onnxruntime ('invalid expand shape') at serve time."""
    with pytest.raises(CareError, match="--max-seq-length"):
        export_query_encoder(str(tiny_query_dir), tmp_path / "onnx", max_seq_length=length)
    assert not (tmp_path / "onnx").exists()


def test_an_existing_file_as_output_is_refused_and_kept(tiny_query_dir, tmp_path):
    """It was an 'unexpected FileExistsError' after the model had loaded."""
    target = tmp_path / "notes.txt"
    target.write_text("mine", encoding="utf-8")
    with pytest.raises(CareError, match="existing file"):
        export_query_encoder(str(tiny_query_dir), target)
    assert target.read_text(encoding="utf-8") == "mine"
