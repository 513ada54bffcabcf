"""Run a pretraining config and SIGKILL this process right after the checkpoint of a given step.

Usage: python resume_worker.py CONFIG.json KILL_AT_STEP  (used by test_resume.py)
"""

from __future__ import annotations

import json
import os
import signal
import sys

import torch

from care.pretrain.config import PretrainConfig
from care.pretrain.trainer import pretrain


def main() -> None:
    torch.set_num_threads(1)
    config = PretrainConfig.from_dict(json.loads(open(sys.argv[1], encoding="utf-8").read()))
    kill_at = int(sys.argv[2])

    def kill_after_checkpoint(event, state) -> None:
        if event == "checkpoint" and state.global_step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    pretrain(config, callbacks=[kill_after_checkpoint])


if __name__ == "__main__":
    main()
