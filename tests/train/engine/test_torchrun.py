"""Two CPU processes under torchrun train a stage end to end (DDP over gloo), checkpointing by the clock.

Regression: BERT's pooler never reaches the loss under CLS / mean pooling of the last hidden states, and
DDP without ``find_unused_parameters`` aborted the second step ("Expected to have finished reduction").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ..trainer_fixtures import tiny_config_dict

#: Generous: two interpreters import torch + transformers on a shared 2-core machine.
TIMEOUT_S = 300


def test_two_processes_train_init_query(tiny_dir, tmp_path) -> None:
    out = tmp_path / "out"
    cfg = tiny_config_dict(tiny_dir, "init_query", out)
    cfg["optim"].update({"max_steps": 3, "batch_size": 2})  # 8 rows: 2 per process per step
    # checkpoints by the clock only, due at every step: both ranks enter every save (the schedule's
    # broadcast and the saves' barriers run under two processes without hanging)
    cfg["checkpoint"] = {"every_steps": None, "every_minutes": 1e-9, "keep_last": 5, "keep_after_training": True}
    config = tmp_path / "init_query.json"
    config.write_text(json.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "care.cli", "train", "--config", str(config)],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "2 process(es)" in run.stderr
    result = json.loads((out / "train_result.json").read_text())
    assert result["completed"] and result["global_step"] == 3
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-1", "step-2", "step-3"]
