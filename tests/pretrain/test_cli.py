"""``care pretrain``: commands registered; a short RetroMAE run from a config with overrides."""

from __future__ import annotations

import torch
import yaml
from typer.testing import CliRunner

from care.cli import app

from .fixtures import config_dict


def test_help_lists_commands():
    result = CliRunner().invoke(app, ["pretrain", "--help"])
    assert result.exit_code == 0
    for name in ("retromae", "contrastive", "make-pairs"):
        assert name in result.output


def test_retromae_from_config_with_overrides(tiny_root, tiny_bert, tmp_path):
    torch.set_num_threads(1)
    cfg = config_dict("retromae", tiny_bert, tiny_root / "texts.txt", tmp_path / "run")
    del cfg["method"]  # the command supplies it
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    result = CliRunner().invoke(app, ["pretrain", "retromae", "--config", str(path), "--set", "optim.max_steps=2"])
    assert result.exit_code == 0, result.output
    assert "retromae: 2 steps, 8 records" in result.output
    assert (tmp_path / "run" / "model" / "config.json").is_file()

    wrong = CliRunner().invoke(app, ["pretrain", "contrastive", "--config", str(tmp_path / "run" / "pretrain_config.yaml")])
    assert wrong.exit_code != 0
    assert "care pretrain contrastive" in str(wrong.exception or wrong.output)
