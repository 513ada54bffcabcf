"""Time a few optimiser steps of the real trainer at a config's shapes: step time and peak GPU memory.

:func:`time_training_steps` runs :func:`care.train.engine.trainer.train` and stops it from the step callback once
the steps are done, before the final checkpoint and model saves (gigabytes at the paper's shapes, and not
what a step costs). The first step carries kernel selection and allocator growth; the median of the later
ones is the steady step time.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from care.train.engine.config import TrainConfig

logger = logging.getLogger(__name__)


class StepsDone(Exception):
    """Raised by :func:`time_training_steps`'s callback once the timed steps are done."""


@dataclass(frozen=True)
class StepTiming:
    """What :func:`time_training_steps` measured.

    Attributes:
        steps: steps run.
        seconds_total: wall-clock seconds of the whole run, model loading included.
        losses: the loss of each step.
        steady_step_seconds: median seconds of the steps after the first (None with one step).
        steady_steps_timed: how many steps that median is over.
        peak_memory_gib / memory_at_start_gib: GPU memory at its peak and when the run started (None off CUDA).
    """

    steps: int
    seconds_total: float
    losses: list[float]
    steady_step_seconds: float | None
    steady_steps_timed: int
    peak_memory_gib: float | None
    memory_at_start_gib: float | None


def time_training_steps(config: TrainConfig, steps: int, device: str) -> StepTiming:
    """Train ``config`` on ``device`` (``"cuda"`` or ``"cpu"``) for ``steps`` optimiser steps and time them."""
    from care.bench.encoding_throughput import fresh_peak_memory, peak_memory_gib, synchronize
    from care.train.engine.trainer import train

    step_ends: list[float] = []
    losses: list[float] = []

    def on_event(trainer: Any, event: str, state: Any) -> None:
        """The trainer's step callback: note when each step ends; stop once ``steps`` are done."""
        if event == "step":
            synchronize(device)
            step_ends.append(time.perf_counter())
            losses.append(state.last_loss)
            if state.global_step >= steps:
                raise StepsDone  # before the final checkpoint and model saves

    at_start = fresh_peak_memory(device)  # the encoder or trainer of an earlier phase must not count here
    start = time.perf_counter()
    with contextlib.suppress(StepsDone):
        train(config, callbacks=[on_event])
    seconds = time.perf_counter() - start
    steady = [b - a for a, b in zip(step_ends, step_ends[1:])]
    timing = StepTiming(steps=len(step_ends), seconds_total=seconds, losses=losses,
                        steady_step_seconds=sorted(steady)[len(steady) // 2] if steady else None,
                        steady_steps_timed=len(steady), peak_memory_gib=peak_memory_gib(device),
                        memory_at_start_gib=at_start)
    logger.info("%d steps in %.1f s, steady step %s s", timing.steps, seconds, timing.steady_step_seconds)
    return timing
