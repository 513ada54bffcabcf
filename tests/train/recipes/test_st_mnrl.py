"""``care train baseline st-mnrl``: sentence-transformers' trainer on both sides, a folder that reloads to the
same vectors with the prefixes it was trained with, skipped when finished, e5's prefixes for an e5 checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from care.config import ConfigError
from care.errors import CareError
from care.train.recipes.baselines import BaselinePaths
from care.train.recipes.st_mnrl import StMnrlConfig

from .plans import run_baseline_items

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "baselines" / "st_mnrl"
#: Fast settings: 8 rows, 2 batches of 4 per epoch, 2 epochs; Chinese prefixes so the test sees them applied.
FAST = ["batch_size=4", "epochs=2", "max_length=32", "lr=1e-3", "seed=3", "query_prompt=问：", "document_prompt=答："]
QUERIES = ["头痛怎么办", "失眠怎么调理"]


def _paths(tiny_dir: Path, out: Path) -> BaselinePaths:
    return BaselinePaths(str(tiny_dir / "tiny-bert"), str(tiny_dir / "train.jsonl"), str(out))


def test_st_mnrl_trains_and_reloads_to_the_same_vectors(tiny_dir, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    from care.encoders.registry import load_model
    from care.models.query import build_query_encoder

    torch.set_num_threads(1)
    result = run_baseline_items("st-mnrl", _paths(tiny_dir, tmp_path / "out"), FAST, config_dir=CONFIG)
    assert result.model == str(tmp_path / "out" / "model")
    assert result.steps["train"].global_step == 4 and result.steps["train"].train_seconds > 0
    assert not (tmp_path / "out" / "checkpoints").exists()  # removed once the model is saved
    plain = SentenceTransformer(result.model)  # sentence-transformers alone, prefixes by hand
    expected = plain.encode(["问：" + q for q in QUERIES], normalize_embeddings=True)
    care_side = load_model(result.model)  # care's loader applies the stored prefixes
    np.testing.assert_allclose(care_side.encode_queries(QUERIES), expected, atol=1e-5)
    np.testing.assert_allclose(care_side.encode_documents(QUERIES), plain.encode(["答：" + q for q in QUERIES],
                                                                                  normalize_embeddings=True), atol=1e-5)
    untrained = build_query_encoder(tiny_dir / "tiny-bert", pooling="mean", max_seq_length=32)
    before = untrained.encode(["问：" + q for q in QUERIES], normalize_embeddings=True)
    assert float(np.abs(before - expected).max()) > 1e-3  # training moved the weights

    def must_not_train(*args, **kwargs):
        raise AssertionError("a finished st-mnrl run was trained again")

    monkeypatch.setattr("care.train.recipes.st_mnrl._train", must_not_train)
    again = run_baseline_items("st-mnrl", _paths(tiny_dir, tmp_path / "out"), FAST, config_dir=CONFIG)
    assert again.model == result.model
    with pytest.raises(CareError, match="other settings"):  # the folder holds another run's model
        run_baseline_items("st-mnrl", _paths(tiny_dir, tmp_path / "out"), [*FAST, "lr=1e-2"], config_dir=CONFIG)


def test_the_shipped_config_is_the_peer_rows_settings():
    config = StMnrlConfig.load(CONFIG / "train.yaml")
    assert config == StMnrlConfig()
    assert (config.epochs, config.batch_size, config.lr, config.warmup_ratio, config.scale, config.max_length) == (
        1, 32, 2e-5, 0.1, 50.0, 192)


def test_an_e5_checkpoint_trains_with_e5_prefixes(tmp_path, tiny_dir):
    e5 = tmp_path / "e5"
    e5.mkdir()
    (e5 / "config.json").write_text(json.dumps({"_name_or_path": "intfloat/multilingual-e5-small"}))
    assert StMnrlConfig().prompts(str(e5)) == ("query: ", "passage: ")
    assert StMnrlConfig().prompts(str(tiny_dir / "tiny-bert")) == ("", "")
    assert StMnrlConfig(query_prompt="", document_prompt="d: ").prompts(str(e5)) == ("", "d: ")


def test_bad_settings_name_the_field(tiny_dir, tmp_path):
    with pytest.raises(ConfigError, match="config field 'warmup_ratio': must be in \\[0, 1\\), got 1.5"):
        run_baseline_items("st-mnrl", _paths(tiny_dir, tmp_path / "a"), ["warmup_ratio=1.5"])
    with pytest.raises(ConfigError, match="unknown field 'optim'"):
        run_baseline_items("st-mnrl", _paths(tiny_dir, tmp_path / "b"), ["optim.lr=1"], config_dir=CONFIG)
    paths = BaselinePaths(str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"), str(tmp_path / "c"),
                          query_model=str(tiny_dir / "tiny-bert"))
    with pytest.raises(ConfigError, match="trains one model on both sides"):
        run_baseline_items("st-mnrl", paths)


def test_the_command_runs_the_baseline(tiny_dir, tmp_path, monkeypatch):
    import typer

    from care.train.cli import register
    from care.train.engine.trainer import TrainResult

    seen = {}

    def fake(model, train_file, output_dir, config):
        seen.update(model=model, lr=config.lr)
        return TrainResult("st_mnrl", str(output_dir), 3, 0.5, query_model=f"{output_dir}/model",
                           document_model=f"{output_dir}/model")

    monkeypatch.setattr("care.train.recipes.st_mnrl.train_st_mnrl", fake)
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["train", "baseline", "st-mnrl", "--document-model", str(tiny_dir / "tiny-bert"),
                                   "--train", str(tiny_dir / "train.jsonl"), "-o", str(tmp_path / "o"),
                                   "--config-dir", str(CONFIG), "--set", "lr=3e-5"])
    assert res.exit_code == 0, res.output
    assert seen == {"model": str(tiny_dir / "tiny-bert"), "lr": 3e-5}
    assert f"st-mnrl: evaluate {tmp_path / 'o' / 'model'}" in res.output
