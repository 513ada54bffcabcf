"""Shipped stage presets: which document models pick them, and that every preset file is a valid stage config."""

from __future__ import annotations

import json

import pytest

from care.errors import CareError
from care.models.e5_export import EXPORT_RECORD
from care.train.engine.config import TrainConfig
from care.train.recipes.presets import PRESETS, default_preset, is_e5_checkpoint, preset_dir, resolve_config_dir
from care.train.recipes.recipe import RECIPE_STAGES, TRAINING_STAGE, _stage_config


def _hf_folder(tmp_path, name: str, name_or_path: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "_name_or_path": name_or_path}), encoding="utf-8")
    return folder


def test_e5_checkpoints_are_recognised(tmp_path):
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / EXPORT_RECORD).write_text("{}", encoding="utf-8")
    assert is_e5_checkpoint(exported) and is_e5_checkpoint(f"{exported}?pooling=mean")
    assert is_e5_checkpoint(_hf_folder(tmp_path, "hub", "intfloat/multilingual-e5-small"))
    assert not is_e5_checkpoint(_hf_folder(tmp_path, "bge", "BAAI/bge-small-zh-v1.5"))
    assert not is_e5_checkpoint(_hf_folder(tmp_path, "e5ish", "models/some-e55-model"))
    assert not is_e5_checkpoint(tmp_path / "missing") and not is_e5_checkpoint("Qwen/Qwen3-Embedding-4B")


def test_the_recipe_picks_the_e5_preset_only_for_e5_documents(tmp_path):
    e5 = _hf_folder(tmp_path, "e5", "intfloat/multilingual-e5-small")
    qwen = _hf_folder(tmp_path, "qwen", "Qwen/Qwen3-4B")
    assert default_preset(str(e5)) == "e5" and default_preset(str(qwen)) is None and default_preset(None) is None
    assert resolve_config_dir(None, str(e5)) == preset_dir("e5")
    assert resolve_config_dir(None, str(qwen)) is None  # the stages' declared defaults (the paper's LLM tower)
    assert resolve_config_dir("preset:e5", str(qwen)) == preset_dir("e5")
    assert resolve_config_dir(tmp_path / "mine", str(e5)) == tmp_path / "mine"  # an explicit folder always wins
    with pytest.raises(CareError, match="unknown preset 'bge'; shipped presets: e5"):
        resolve_config_dir("preset:bge", None)


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("stage", RECIPE_STAGES)
def test_every_preset_file_is_a_valid_stage_config(name, stage, tmp_path):
    folder = preset_dir(name)
    assert (folder / f"{stage}.yaml").is_file()
    trained_as = TRAINING_STAGE.get(stage, stage)
    wiring = {"stage": trained_as, "output_dir": str(tmp_path / stage), "model.query_model": "q",
              "model.document_model": "d", "data.train_file": "train.jsonl"}
    config = _stage_config(stage, folder, [], wiring)
    assert isinstance(config, TrainConfig) and config.stage == trained_as and config.output_dir == str(tmp_path / stage)
    if name == "e5":  # e5's prefixes on both sides: the zero-shot model was trained with them
        assert config.model.query_prompt == "query: "
        if stage != "init_query":
            assert config.model.document_prompt == "passage: "
