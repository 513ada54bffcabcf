"""Two CPU processes under torchrun pretrain contrastively through the engine's loop (DDP over gloo).

Regression: pretraining's own loop ran DDP without ``find_unused_parameters`` (accelerate's default); the tiny
BERT's pooler never reaches a CLS-pooled loss, and the second step aborted ("Expected to have finished
reduction in the prior iteration"). The engine's ``runtime`` section turns the search on by default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .fixtures import config_dict

#: Generous: two interpreters import torch + transformers on a shared 2-core machine.
TIMEOUT_S = 300
STEPS, PER_PROCESS = 3, 2


def test_two_processes_pretrain_contrastive(tiny_root, tiny_bert, tmp_path) -> None:
    out = tmp_path / "out"
    cfg = config_dict("contrastive", tiny_bert, tiny_root / "pairs.jsonl", out,
                      optim={"batch_size": PER_PROCESS, "max_steps": STEPS},
                      contrastive={"learn_temperature": True})
    config = tmp_path / "contrastive.json"
    config.write_text(json.dumps(cfg))
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "care.cli", "pretrain", "contrastive", "--config", str(config)],
        capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "2 process(es)" in run.stderr
    result = json.loads((out / "pretrain_result.json").read_text())
    assert result["global_step"] == STEPS
    assert result["records_seen"] == STEPS * PER_PROCESS * 2  # each step reads one global batch of both ranks
    assert (out / "model" / "config.json").is_file()
