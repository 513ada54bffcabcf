"""Run a training config and SIGKILL this process right after the checkpoint of a given step.

Usage: python resume_worker.py CONFIG.json KILL_AT_STEP  (used by test_resume.py)
"""

from __future__ import annotations

import json
import os
import signal
import sys

import torch

from care.train.engine.config import TrainConfig
from care.train.engine.trainer import train


def main() -> None:
    torch.set_num_threads(1)
    config = TrainConfig.from_dict(json.loads(open(sys.argv[1], encoding="utf-8").read()))
    kill_at = int(sys.argv[2])

    def kill_after_checkpoint(trainer, event, state) -> None:
        if event == "checkpoint" and state.global_step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    train(config, callbacks=[kill_after_checkpoint])


if __name__ == "__main__":
    main()
