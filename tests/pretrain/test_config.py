"""PretrainConfig: YAML round trip, field-naming errors, CLI method check, shipped configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from care.pretrain.config import PretrainConfig, load_pretrain_config
from care.train.engine.config import ConfigError

CONFIGS = Path(__file__).parents[2] / "configs" / "pretrain"


def test_yaml_round_trip(tmp_path):
    cfg = PretrainConfig.from_dict({"method": "contrastive", "output_dir": str(tmp_path / "o"),
                                    "model": {"name_or_path": "m"}, "data": {"train_files": ["p.jsonl"]},
                                    "contrastive": {"learn_temperature": True, "grad_cache_chunk_size": 8}})
    cfg.save(tmp_path / "c.yaml")
    again = load_pretrain_config(tmp_path / "c.yaml", ["optim.lr=2e-5"])
    assert again.optim.lr == 2e-5
    again.optim.lr = cfg.optim.lr
    assert again.to_dict() == cfg.to_dict()


@pytest.mark.parametrize("override, field", [
    ("retromae.encoder_mask_ratio=1.5", "retromae.encoder_mask_ratio"),
    ("contrastive.temperature=5", "contrastive.temperature"),
    ("optim.batch_size=1", "optim.batch_size"),
    ("data.pair_fields=[a]", "data.pair_fields"),
    ("model.pooling=max", "model.pooling"),
])
def test_bad_field_is_named(tmp_path, override, field):
    (tmp_path / "c.yaml").write_text("method: contrastive\nmodel: {name_or_path: m}\ndata: {train_files: [a.jsonl]}\n")
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_pretrain_config(tmp_path / "c.yaml", [override])


def test_unknown_key_and_method_mismatch(tmp_path):
    (tmp_path / "c.yaml").write_text("method: retromae\nmodel: {name_or_path: m, colour: red}\ndata: {train_files: [a]}\n")
    with pytest.raises(ConfigError, match="model.colour"):
        load_pretrain_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("method: retromae\nmodel: {name_or_path: m}\ndata: {train_files: [a]}\n")
    with pytest.raises(ConfigError, match="care pretrain contrastive"):
        load_pretrain_config(tmp_path / "d.yaml", method="contrastive")


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_shipped_configs_load(name):
    cfg = load_pretrain_config(CONFIGS / name)
    assert cfg.method in name
