"""care model average: the weighted mean of saved models' tensors, and the layouts it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from care.cli import app
from care.errors import CareError
from care.models.averaging import PROVENANCE_FILE, average_model_folders

runner = CliRunner()


@pytest.fixture(scope="module")
def two_towers(tiny_query_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny query tower saved twice: as built, and with every float tensor shifted by seeded noise."""
    from care.models.query import build_query_encoder

    root = tmp_path_factory.mktemp("soup")
    a, b = root / "a", root / "b"
    build_query_encoder(str(tiny_query_dir), pooling="mean", max_seq_length=32).save(str(a))
    build_query_encoder(str(tiny_query_dir), pooling="mean", max_seq_length=32).save(str(b))
    weights = next(b.rglob("model.safetensors"))
    generator = torch.Generator().manual_seed(0)
    tensors = {k: v + torch.randn(v.shape, generator=generator) if v.is_floating_point() else v
               for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights))
    return a, b


def test_cli_writes_the_weighted_mean_of_every_float_tensor(two_towers, tmp_path):
    a, b = two_towers
    out = tmp_path / "soup"
    result = runner.invoke(app, ["model", "average", str(a), str(b), "-o", str(out), "--weight", "1", "--weight", "3"])
    assert result.exit_code == 0, result.output
    rel = next(a.rglob("model.safetensors")).relative_to(a)
    ta, tb, tout = (load_file(str(f / rel)) for f in (a, b, out))
    assert set(tout) == set(ta)
    for key, value in tout.items():
        expected = 0.25 * ta[key].double() + 0.75 * tb[key].double() if value.is_floating_point() else ta[key]
        assert value.dtype == ta[key].dtype
        assert torch.allclose(value.double(), expected, atol=1e-6), key
    provenance = json.loads((out / PROVENANCE_FILE).read_text())
    assert {k: provenance[k] for k in ("sources", "weights")} == {"sources": [str(a), str(b)], "weights": [0.25, 0.75]}
    from sentence_transformers import SentenceTransformer

    soup = SentenceTransformer(str(out), device="cpu")  # a loadable model folder, the first one's config
    assert soup.encode(["头痛怎么办"]).shape == SentenceTransformer(str(a), device="cpu").encode(["头痛怎么办"]).shape


def test_a_model_averaged_with_itself_encodes_the_same(two_towers, tmp_path):
    from sentence_transformers import SentenceTransformer

    a, _ = two_towers
    out = average_model_folders([a, a, a], tmp_path / "same")
    texts = ["头痛怎么办", "高血压患者应该吃什么药"]
    assert torch.allclose(torch.from_numpy(SentenceTransformer(str(out), device="cpu").encode(texts)),
                          torch.from_numpy(SentenceTransformer(str(a), device="cpu").encode(texts)), atol=1e-6)


def test_models_of_another_layout_are_refused_and_nothing_is_written(two_towers, tiny_document_dir, tmp_path):
    from care.models.document import build_document_encoder

    a, _ = two_towers
    other = tmp_path / "qwen"
    build_document_encoder(str(tiny_document_dir), max_seq_length=32).save(str(other))
    with pytest.raises(CareError, match="differ from|tensor '"):
        average_model_folders([a, other], tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(CareError, match="two or more"):
        average_model_folders([a], tmp_path / "bad")
    with pytest.raises(CareError, match="2 weight\\(s\\) given for 3 model"):
        average_model_folders([a, a, a], tmp_path / "bad", [1, 2])
    with pytest.raises(CareError, match="positive sum"):
        average_model_folders([a, a], tmp_path / "bad", [0, 0])


def test_lora_adapters_are_refused_with_the_fix(two_towers, tmp_path):
    import shutil

    a, _ = two_towers
    adapter = shutil.copytree(a, tmp_path / "lora")
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    result = runner.invoke(app, ["model", "average", str(a), str(adapter), "-o", str(tmp_path / "out")])
    assert result.exit_code != 0 and isinstance(result.exception, CareError)
    assert "merge_lora_on_save" in str(result.exception) and "adapter_model.safetensors" in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_average_once_keeps_the_soup_until_a_source_or_a_weight_changes(tmp_path):
    from care.models.averaging import average_once

    def model(name: str, value: float) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        save_file({"w": torch.full((2,), value)}, str(folder / "model.safetensors"))
        return folder

    a, b = model("a", 1.0), model("b", 5.0)
    soup = average_once([a, b], tmp_path / "soup")
    assert load_file(str(soup / "model.safetensors"))["w"].tolist() == [3.0, 3.0]
    built = (soup / "model.safetensors").stat().st_mtime_ns
    assert average_once([a, b], soup) == soup and (soup / "model.safetensors").stat().st_mtime_ns == built  # kept
    save_file({"w": torch.full((2,), 9.0)}, str(b / "model.safetensors"))  # b retrained in place
    average_once([a, b], soup)
    assert load_file(str(soup / "model.safetensors"))["w"].tolist() == [5.0, 5.0]
    average_once([a, b], soup, weights=[3, 1])  # another weighting: averaged again
    assert load_file(str(soup / "model.safetensors"))["w"].tolist() == [3.0, 3.0]
    assert len(json.loads((soup / PROVENANCE_FILE).read_text(encoding="utf-8"))["fingerprints"]) == 2
