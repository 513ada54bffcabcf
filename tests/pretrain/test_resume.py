"""A pretraining run killed (SIGKILL) after a checkpoint resumes to exactly the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from care.errors import CareError
from care.pretrain.config import PretrainConfig
from care.pretrain.trainer import pretrain
from care.train.engine.checkpoint import list_checkpoints

from .fixtures import config_dict

WORKER = Path(__file__).with_name("resume_worker.py")
MAX_STEPS = 5
KILL_AT = 2


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoints" / f"step-{MAX_STEPS}" / "pytorch_model.bin", map_location="cpu")


def _losses(run: Path) -> list[float]:
    return [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines()]


# 8 records, batch 3: epochs of 3 batches (3, 3, 2), so 5 steps cross an epoch boundary and the kill at
# step 2 lands mid-epoch; the shuffle buffer, the masks / RetroMAE context sampling (torch RNG), AdamW
# moments, the LR schedule and a learnable temperature must all come back exactly.
@pytest.mark.parametrize("method, data, section", [
    ("retromae", "texts.txt", {"retromae": {"enhanced_decoding": True}}),
    ("contrastive", "pairs.jsonl", {"contrastive": {"learn_temperature": True, "grad_cache_chunk_size": 2}}),
])
def test_kill_and_resume_is_exact(tiny_root, tiny_bert, tmp_path, method, data, section):
    torch.set_num_threads(1)

    def config(out: Path) -> dict:
        cfg = config_dict(method, tiny_bert, tiny_root / data, out,
                          optim={"batch_size": 3, "max_steps": MAX_STEPS, "lr": 2e-3, "warmup_ratio": 0.2},
                          checkpoint={"every_steps": KILL_AT, "keep_last": 1, "keep_after_training": True}, **section)
        cfg["data"]["shuffle_buffer"] = 4
        return cfg

    straight = tmp_path / "straight"
    pretrain(PretrainConfig.from_dict(config(straight)))

    killed = tmp_path / "killed"
    cfg_path = tmp_path / "killed.json"
    cfg_path.write_text(json.dumps(config(killed)))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    proc = subprocess.run([sys.executable, str(WORKER), str(cfg_path), str(KILL_AT)], env=env,
                          capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert [p.name for p in list_checkpoints(killed)] == [f"step-{KILL_AT}"]
    assert not (killed / "model").exists()

    with pytest.raises(CareError, match="--resume"):
        pretrain(PretrainConfig.from_dict(config(killed)))
    result = pretrain(PretrainConfig.from_dict(config(killed)), resume=True)
    assert result.global_step == MAX_STEPS
    assert result.records_seen == 3 + 3 + 2 + 3 + 3  # every record of epoch 0 once, then epoch 1

    a, b = _weights(straight), _weights(killed)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=1e-6, msg=name)
    assert len(_losses(killed)) == MAX_STEPS  # replayed steps are not logged twice
    assert _losses(killed) == pytest.approx(_losses(straight), abs=1e-6)
    assert json.loads((killed / "pretrain_result.json").read_text())["extra"] == \
        json.loads((straight / "pretrain_result.json").read_text())["extra"]
    # a finished run is returned as is
    assert pretrain(PretrainConfig.from_dict(config(killed)), resume=True).global_step == MAX_STEPS
