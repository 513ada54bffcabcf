"""A run killed (SIGKILL) right after a checkpoint resumes to exactly the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from care.train.engine.checkpoint import list_checkpoints
from care.train.engine.config import TrainConfig
from care.train.engine.trainer import train

from ..trainer_fixtures import tiny_config_dict

WORKER = Path(__file__).parent.parent / "resume_worker.py"


def _weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoints" / f"step-{step}" / "pytorch_model.bin", map_location="cpu")


def test_kill_and_resume_is_exact(tiny_dir, tmp_path):
    torch.set_num_threads(1)
    # stage2: both towers (query fully, document via LoRA), dropout on, 2 batches per epoch, so the
    # kill at step 3 lands mid-epoch and resume must restore weights, AdamW moments, LR schedule,
    # RNG (dropout masks, negative sampling) and the data position.
    def config(out: Path) -> dict:
        return tiny_config_dict(tiny_dir, "stage2", out, optim={"batch_size": 4, "max_steps": 4, "lr": 2e-3},
                                checkpoint={"every_steps": 3, "keep_last": 1, "keep_after_training": True},
                                model={"lora": {"r": 4, "alpha": 8, "dropout": 0.1}})

    straight = tmp_path / "straight"
    train(TrainConfig.from_dict(config(straight)))

    killed = tmp_path / "killed"
    cfg_path = tmp_path / "killed.json"
    cfg_path.write_text(json.dumps(config(killed)))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    proc = subprocess.run([sys.executable, str(WORKER), str(cfg_path), "3"], env=env, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert [p.name for p in list_checkpoints(killed)] == ["step-3"]
    assert not (killed / "train_result.json").exists()

    before_kill = json.loads((killed / "checkpoints" / "step-3" / "trainer_state.json").read_text())["elapsed_s"]
    result = train(TrainConfig.from_dict(config(killed)), resume=True)
    assert result.global_step == 4
    # the wall time recorded for the stage sums the killed run's loop time and the resumed one's
    assert 0 < before_kill < result.train_seconds

    a, b = _weights(straight, 4), _weights(killed, 4)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=1e-6, msg=name)
    losses = lambda run: [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    assert len(losses(killed)) == 4  # replayed steps are not logged twice
    assert all(abs(x - y) < 1e-6 for x, y in zip(losses(killed), losses(straight)))
