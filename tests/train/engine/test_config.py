"""TrainConfig: YAML/JSON round-trip, validation naming the field, --set overrides, shipped recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from care.train.engine.config import ConfigError, TrainConfig, apply_overrides, load_config

CONFIGS = Path(__file__).parents[3] / "configs"


def _config() -> TrainConfig:
    return TrainConfig.from_dict({
        "stage": "stage2", "output_dir": "runs/x",
        "model": {"query_model": "q", "document_model": "d", "lora": {"r": 8, "alpha": 16},
                  "query_prompt": "Instruct: 检索\nQuery: "},
        "data": {"train_file": "train.jsonl"},
        "loss": {"matryoshka_dims": [32, 64]},
    })


def test_yaml_and_json_round_trip(tmp_path):
    config = _config()
    for name in ("c.yaml", "c.json"):
        config.save(tmp_path / name)
        again = load_config(tmp_path / name)
        assert again == config
        assert again.to_dict() == config.to_dict()
    assert yaml.safe_load(config.to_yaml()) == json.loads(config.to_json()) == config.to_dict()


def test_paper_defaults():
    c = TrainConfig()
    assert (c.optim.lr, c.optim.warmup_ratio, c.data.n_negatives) == (1e-4, 0.05, 7)
    assert (c.loss.lambda_contrastive, c.loss.lambda_mse) == (1.0, 1.0)
    assert (c.model.lora.r, c.model.lora.alpha) == (32, 64)


def test_model_lora_is_the_models_layer_lora_settings():
    """One LoRA settings class: the config section is the dataclass ``care.models.lora`` builds adapters from,
    typed on load (a YAML list becomes the tuple), and its own checks name the field by its full path."""
    from care.models.lora import LoraSettings

    lora = _config().model.lora
    assert type(lora) is LoraSettings and (lora.r, lora.alpha, lora.dropout) == (8, 16, 0.05)
    data = apply_overrides(_config().to_dict(), ["model.lora.target_modules=[q_proj, v_proj]"])
    assert TrainConfig.from_dict(data).model.lora.target_modules == ("q_proj", "v_proj")
    for override, field in [("model.lora.dropout=1.5", "model.lora.dropout"),
                            ("model.lora.target_modules=[]", "model.lora.target_modules")]:
        with pytest.raises(ConfigError, match=f"'{field}'"):
            TrainConfig.from_dict(apply_overrides(_config().to_dict(), [override]), source="stage2.yaml")
    import care.train.engine.config as engine_config

    assert not hasattr(engine_config, "LoraConfig")


@pytest.mark.parametrize("override, field", [
    ("optim.lr=-1", "optim.lr"),
    ("stage=stage3", "stage"),
    ("loss.temperature=0", "loss.temperature"),
    ("runtime.mixed_precision=fp8", "runtime.mixed_precision"),
    ("optim.batch_size=two", "optim.batch_size"),
    ("model.lora.r=0", "model.lora.r"),
    ("model.document_model=null", "model.document_model"),
    ("optim.lbr=3", "optim.lbr"),
])
def test_validation_names_the_field(override, field):
    data = apply_overrides(_config().to_dict(), [override])
    with pytest.raises(ConfigError, match=f"'{field}'"):
        TrainConfig.from_dict(data)


def test_overrides_parse_values(tmp_path):
    _config().save(tmp_path / "c.yaml")
    c = load_config(tmp_path / "c.yaml", ["optim.lr=2e-5", "loss.matryoshka_dims=[16, 32]",
                                          "optim.max_steps=null", "model.teacher.kind=encoder",
                                          "model.teacher.spec=e5", "model.lora=null"])
    assert c.optim.lr == 2e-5 and c.loss.matryoshka_dims == [16, 32] and c.optim.max_steps is None
    assert c.model.teacher.spec == "e5" and c.model.lora is None
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(tmp_path / "c.yaml", ["optim.lr"])


def test_both_lambdas_zero_rejected():
    data = apply_overrides(_config().to_dict(), ["loss.lambda_contrastive=0", "loss.lambda_mse=0"])
    with pytest.raises(ConfigError, match="cannot both be 0"):
        TrainConfig.from_dict(data)


@pytest.mark.parametrize("path", sorted((CONFIGS / "care_tiny").glob("*.yaml")) + sorted((CONFIGS / "care_paper").glob("*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_configs_are_valid(path):
    config = load_config(path)
    assert config.stage == path.stem
    if path.parent.name == "care_paper":
        assert config.optim.lr == 1e-4 and config.optim.warmup_ratio == 0.05
        assert config.runtime.mixed_precision == "bf16"
        assert config.loss.temperature == (0.1 if config.stage == "stage1" else 0.02)
    if config.stage == "init_document" and path.parent.name == "care_paper":
        assert config.model.document_model == "Qwen/Qwen3-4B" and (config.model.lora.r, config.model.lora.alpha) == (32, 64)


def test_deepspeed_config_is_json():
    ds = json.loads((CONFIGS / "deepspeed" / "zero2.json").read_text())
    assert ds["zero_optimization"]["stage"] == 2
