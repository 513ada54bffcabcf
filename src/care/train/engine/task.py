"""What the one training loop (:class:`care.train.engine.trainer.Trainer`) needs from an objective.

The loop owns everything a run has in common: the accelerator (CPU, one GPU, DDP, DeepSpeed; mixed
precision), seeding, AdamW (:func:`care.train.engine.optimizer.adamw`) with linear warmup/decay, gradient
clipping, the optimiser step, logging to ``metrics.jsonl`` / TensorBoard, callbacks, atomic checkpoints on
a schedule and exact resume. A :class:`TrainingTask` says what is particular to one objective:

- its settings (:class:`LoopSettings`) and the config saved beside the run;
- ``setup`` (load the data, a teacher, ...; return the run's number of optimiser steps) and ``build``
  (the module to train under DistributedDataParallel, plus small side modules kept out of it);
- ``param_groups`` (which parameters train, at which weight decay and learning rate);
- ``batches`` (the micro-batches from where the :class:`~care.train.engine.checkpoint.TrainerState` says the
  run is; the task records its data position in that state before yielding) and ``forward_backward``
  (batch -> loss output, gradients accumulated);
- ``finished`` / ``save`` (the result file: what a finished run produced, and how it is written).

Implemented by a CARE stage (:class:`care.train.engine.stage_task.StageTask`) and by the pretraining
objectives (:mod:`care.pretrain.tasks`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from care.config import Config
from care.train.engine.checkpoint import TrainerState
from care.train.engine.config import CheckpointConfig, RuntimeConfig

if TYPE_CHECKING:
    import torch
    from torch import nn

    from care.train.engine.losses.output import LossOutput

#: What a finished run returns (``TrainResult``, ``PretrainResult``).
R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class LoopSettings:
    """The loop's knobs, read from a task's config.

    lr / betas / eps: AdamW's defaults (a param group may set its own ``lr``); warmup_ratio: share of the
    optimiser steps with a linear warmup (then linear decay to 0); max_grad_norm: clip (``None``: off);
    batch_size: rows per process per micro-batch and gradient_accumulation_steps: micro-batches per
    optimiser step (both only tell DeepSpeed; the task's ``batches`` makes them).
    """

    output_dir: Path
    seed: int
    runtime: RuntimeConfig
    checkpoint: CheckpointConfig
    lr: float
    betas: tuple[float, ...]
    eps: float
    warmup_ratio: float
    max_grad_norm: float | None
    batch_size: int
    gradient_accumulation_steps: int = 1


@dataclass
class MicroBatch:
    """One forward + backward's input.

    loss_scale: ``1 / (micro-batches of this optimiser step)`` (gradient accumulation); sync: the last
    micro-batch of the step (gradients all-reduce, the optimiser steps after it).
    """

    batch: Any
    loss_scale: float = 1.0
    sync: bool = True


class TrainingTask(Protocol[R]):
    """One objective the loop trains (see the module docstring)."""

    #: progress-bar label and tracker name (``care-<name>``), e.g. ``stage1``, ``pretrain-retromae``
    name: str
    settings: LoopSettings
    #: saved as ``output_dir / config_file`` when a run starts
    config: Config
    config_file: str

    def finished(self, *, resume: bool) -> R | None:
        """The result of a run that already finished in ``output_dir`` (the loop returns it), ``None`` to train;
        raises when a finished run may not be reused without ``resume``."""

    def setup(self, accelerator) -> int:
        """Load what the steps need (data, a teacher); return the run's number of optimiser steps."""

    def build(self) -> tuple[nn.Module, list[nn.Module]]:
        """``(model, side modules)``: the module wrapped for (distributed) training, and small modules trained
        alongside it but kept out of DDP (moved to the device and checkpointed by the loop)."""

    def param_groups(self, model: nn.Module, side: list[nn.Module]) -> list[dict[str, Any]]:
        """AdamW's param groups: which parameters train, their weight decay and (optionally) ``lr``."""

    def restore(self, state: TrainerState) -> None:
        """After a checkpoint is loaded: put the data position (``state.extra``) back."""

    def batches(self, state: TrainerState, accelerator) -> Iterator[MicroBatch]:
        """This process's micro-batches from ``state``'s position on; updates ``state.epoch`` /
        ``batches_in_epoch`` / ``extra`` before yielding each, so a checkpoint after it resumes right after it."""

    def forward_backward(self, model: nn.Module, micro: MicroBatch, accelerator) -> LossOutput | torch.Tensor:
        """Encode, compute the loss, ``accelerator.backward`` it (scaled by ``micro.loss_scale``); return the loss."""

    def after_optimizer_step(self) -> None:
        """Hook after each optimiser step (e.g. clamp a learnable temperature)."""

    def save(self, model: nn.Module, accelerator, state: TrainerState) -> R:
        """Write the outputs and the result file (called on every process; the main one writes)."""
