"""Atomic, rotating training checkpoints and the small state that makes resume exact.

A checkpoint is a folder ``<output_dir>/checkpoints/step-<N>`` holding what
``accelerate.Accelerator.save_state`` writes (model weights, optimizer, LR scheduler, every RNG
state) plus ``trainer_state.json`` (:class:`TrainerState`: global step, epoch, batches consumed in
that epoch). It is written into a hidden temporary sibling and renamed into place only when
complete, so a kill at any moment leaves either the previous checkpoint set or the new one —
never a half-written folder that resume would pick up. Only the last ``keep_last`` are kept.

:class:`CheckpointSchedule` says when: every ``every_steps`` optimiser steps, once ``every_minutes``
of wall time have passed since the last checkpoint (or the loop's start), and always at the last step.
A step count suits a machine where steps are slow (a CPU); a clock suits one where they are fast (a
GPU writes an e5 Stage II checkpoint, several gigabytes, every few seconds at 50 steps).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from care.data.io import write_json

logger = logging.getLogger(__name__)

CHECKPOINT_DIRNAME = "checkpoints"
STATE_FILE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class TrainerState:
    """Where the loop is. ``batches_in_epoch`` counts micro-batches of ``epoch`` already consumed;
    ``elapsed_s`` is the wall time spent in the training loop so far, summed over resumes."""

    global_step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0
    last_loss: float | None = None
    elapsed_s: float = 0.0
    extra: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> TrainerState:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


def now() -> float:
    """The schedule's clock: ``time.monotonic`` (seconds; immune to wall-clock changes)."""
    return time.monotonic()


class CheckpointSchedule:
    """Decides after each optimiser step whether to write a checkpoint.

    Inputs: ``every_steps`` (``None``: no step trigger), ``every_minutes`` (``None``: no clock trigger),
    ``total_steps`` (the last step always checkpoints), ``clock`` (seconds; default :func:`now`).
    :meth:`due` answers for a step; :meth:`saved` restarts the clock. With several processes the main
    process's clock decides and the answer is broadcast, so every rank enters ``save_checkpoint`` together.
    """

    def __init__(self, every_steps: int | None, every_minutes: float | None, total_steps: int,
                 clock: Callable[[], float] | None = None) -> None:
        self.every_steps, self.total_steps, self.clock = every_steps, total_steps, clock or now
        self.every_seconds = None if every_minutes is None else every_minutes * 60.0
        self.last = self.clock()

    def due(self, step: int, accelerator=None) -> bool:
        if step >= self.total_steps or (self.every_steps and step % self.every_steps == 0):
            return True
        if self.every_seconds is None:
            return False
        late = self.clock() - self.last >= self.every_seconds
        if accelerator is not None and accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            late = broadcast_object_list([late], from_process=0)[0]
        return late

    def saved(self) -> None:
        self.last = self.clock()


def checkpoint_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / CHECKPOINT_DIRNAME


def remove_checkpoints(output_dir: str | Path) -> None:
    """Delete ``<output_dir>/checkpoints`` (called once a stage's outputs are safely written)."""
    root = checkpoint_root(output_dir)
    if root.is_dir():
        shutil.rmtree(root, ignore_errors=True)
        logger.info("removed %s (the stage is finished; set checkpoint.keep_after_training to keep it)", root)


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints (with a trainer state), oldest first."""
    root = checkpoint_root(output_dir)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = _STEP_DIR.match(p.name)
        if m and p.is_dir() and (p / STATE_FILE).is_file():
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    ckpts = list_checkpoints(output_dir)
    return ckpts[-1] if ckpts else None


def save_checkpoint(accelerator, output_dir: str | Path, state: TrainerState, *, keep_last: int) -> Path:
    """Write ``step-<global_step>`` atomically (all ranks must call it), then prune old ones (main rank)."""
    root = checkpoint_root(output_dir)
    final = root / f"step-{state.global_step}"
    tmp = root / f".tmp-step-{state.global_step}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=False)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        write_json(tmp / STATE_FILE, asdict(state))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
        for old in list_checkpoints(output_dir)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
        logger.info("checkpoint saved: %s", final)
    accelerator.wait_for_everyone()
    return final


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
