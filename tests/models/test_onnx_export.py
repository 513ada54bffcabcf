"""``care.models.onnx_export.export_query_once``: one export per model, again when the model is retrained in place."""

from __future__ import annotations

import json

from care.models.onnx_export import SOURCE_FILE, export_query_once


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
