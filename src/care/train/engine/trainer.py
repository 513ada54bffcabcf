"""The one training loop, on accelerate: every CARE stage and every pretraining objective trains through it.

:class:`Trainer` runs a :class:`~care.train.engine.task.TrainingTask` (a stage's
:class:`~care.train.engine.stage_task.StageTask`, a pretraining task of :mod:`care.pretrain.tasks`) on CPU, one
GPU or many (``torchrun`` / ``accelerate launch``: DistributedDataParallel, optional DeepSpeed ZeRO), with
bf16/fp16 autocast, AdamW with linear warmup/decay (``transformers.get_linear_schedule_with_warmup``), gradient
clipping, atomic checkpoints on a schedule (:class:`~care.train.engine.checkpoint.CheckpointSchedule`) and exact
resume (weights, optimizer, scheduler, every RNG state, the task's side modules and its data position).

Per optimiser step: the task's micro-batches (``forward_backward`` each), clip, ``optimizer.step()``, the
task's hook, ``scheduler.step()``; then a ``metrics.jsonl`` line (steps 1, every ``runtime.log_every_steps``
and the last: loss, lr, the loss's components), callbacks, a checkpoint when due.

Outputs in ``output_dir``: the task's config file and outputs (a stage: towers, ``model/``,
``train_result.json``), ``metrics.jsonl`` (one line per logged step), ``logs/`` (TensorBoard) and
``checkpoints/`` (removed once the outputs are written unless ``checkpoint.keep_after_training``).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic

import torch

from care.encoders.base import Encoder
from care.errors import CareError
from care.train.engine.checkpoint import (
    STATE_FILE,
    CheckpointSchedule,
    TrainerState,
    latest_checkpoint,
    list_checkpoints,
    remove_checkpoints,
    save_checkpoint,
)
from care.train.engine.config import TrainConfig
from care.train.engine.optimizer import NO_DECAY, adamw, keep_kernel_choice
from care.train.engine.stage_task import CONFIG_FILE, RESULT_FILE, StageTask, TrainResult, read_result
from care.train.engine.task import LoopSettings, R, TrainingTask

logger = logging.getLogger(__name__)

__all__ = ["CONFIG_FILE", "METRICS_FILE", "NO_DECAY", "RESULT_FILE", "Callback", "Trainer", "TrainResult",
           "read_result", "train", "truncate_metrics"]

METRICS_FILE = "metrics.jsonl"

#: ``callback(trainer, event, state)`` with event in {"step", "checkpoint"}.
Callback = Callable[["Trainer", str, TrainerState], None]


def make_accelerator(settings: LoopSettings):
    """The run's ``accelerate.Accelerator``: mixed precision, CPU or not, TensorBoard under ``logs/``, DDP's
    unused-parameter search, and DeepSpeed when ``runtime.deepspeed_config`` names its JSON."""
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin, DistributedDataParallelKwargs, ProjectConfiguration

    rc, out = settings.runtime, settings.output_dir
    plugin = None
    if rc.deepspeed_config:
        ds = json.loads(Path(rc.deepspeed_config).read_text(encoding="utf-8"))
        ds["train_micro_batch_size_per_gpu"] = settings.batch_size
        ds["gradient_accumulation_steps"] = settings.gradient_accumulation_steps
        if settings.max_grad_norm is not None:
            ds["gradient_clipping"] = settings.max_grad_norm
        ds.pop("train_batch_size", None)
        plugin = DeepSpeedPlugin(hf_ds_config=ds)
    return Accelerator(
        mixed_precision=rc.mixed_precision,
        cpu=rc.cpu,
        log_with=rc.log_with,
        project_config=ProjectConfiguration(project_dir=str(out), logging_dir=str(out / "logs")),
        deepspeed_plugin=plugin,
        step_scheduler_with_optimizer=False,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=rc.find_unused_parameters)],
    )


def truncate_metrics(path: Path, step: int) -> None:
    """After a resume, drop the logged lines of steps that will be replayed (those after ``step``)."""
    from care.data.io import atomic_write

    if not path.is_file():
        return
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    keep = [ln for ln in lines if json.loads(ln).get("step", 0) <= step]
    with atomic_write(path) as fh:
        fh.write("".join(ln + "\n" for ln in keep))


class Trainer(Generic[R]):
    """Train one task to the end.

    Args:
        task: a :class:`~care.train.engine.task.TrainingTask`, or a stage's :class:`TrainConfig` (wrapped in a
            :class:`~care.train.engine.stage_task.StageTask`).
        teacher: with a stage config, an already-built frozen :class:`Encoder` to use instead of
            ``config.model.teacher`` (e.g. a fake encoder in tests, or a loaded e5).
        callbacks: called after every optimiser step (``"step"``) and checkpoint (``"checkpoint"``).

    After :meth:`train`: ``accelerator``, ``model`` (prepared), ``optimizer``, ``scheduler`` and ``state``.
    """

    def __init__(self, task: TrainingTask[R] | TrainConfig, *, teacher: Encoder | None = None,
                 callbacks: Sequence[Callback] = ()) -> None:
        if isinstance(task, TrainConfig):
            task = StageTask(task, teacher=teacher)
        elif teacher is not None:
            raise CareError("Trainer: a teacher goes with a stage's TrainConfig, not with a task")
        self.task = task
        self.config = task.config
        self.callbacks = list(callbacks)
        self.output_dir = task.settings.output_dir
        self.state = TrainerState()
        # built in train()
        self.accelerator = None
        self.model = None
        self.optimizer = None
        self.scheduler = None

    def _log(self, metrics: dict[str, float]) -> None:
        acc = self.accelerator
        if acc.is_main_process:
            with open(self.output_dir / METRICS_FILE, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(metrics) + "\n")
        if self.task.settings.runtime.log_with:
            acc.log({k: v for k, v in metrics.items() if k != "step"}, step=int(metrics["step"]))

    def _resume(self) -> None:
        """Load the latest checkpoint (weights, optimizer, scheduler, RNG, side modules, state, data position)."""
        acc = self.accelerator
        ckpt = latest_checkpoint(self.output_dir)
        if ckpt is None:
            logger.info("no checkpoint in %s: starting from scratch", self.output_dir)
            return
        acc.load_state(str(ckpt))
        keep_kernel_choice(self.optimizer)
        self.state = TrainerState.load(ckpt / STATE_FILE)
        self.task.restore(self.state)
        if acc.is_main_process:
            truncate_metrics(self.output_dir / METRICS_FILE, self.state.global_step)
        logger.info("resumed from %s (step %d, epoch %d, batch %d)", ckpt, self.state.global_step,
                    self.state.epoch, self.state.batches_in_epoch)

    def train(self, *, resume: bool = False) -> R:
        """Run the task to the end (its step count) and save its outputs; returns its result.

        Args:
            resume: continue from the latest complete checkpoint in ``output_dir/checkpoints``, or return the
                recorded result when the run already finished there. Without it, an output folder that already
                holds checkpoints is an error (and a finished one, if the task says so).
        """
        from accelerate.utils import set_seed
        from tqdm.auto import tqdm
        from transformers import get_linear_schedule_with_warmup

        task, s = self.task, self.task.settings
        rc = s.runtime
        finished = task.finished(resume=resume)
        if finished is not None:
            return finished
        if list_checkpoints(self.output_dir) and not resume:
            raise CareError(f"{self.output_dir} already holds checkpoints; pass --resume to continue that run, "
                            "or choose another output_dir")
        if rc.deterministic:
            torch.use_deterministic_algorithms(True)
        set_seed(s.seed)
        acc = self.accelerator = make_accelerator(s)
        if acc.is_main_process:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            task.config.save(self.output_dir / task.config_file)

        total_steps = task.setup(acc)
        model, side = task.build()
        optimizer = adamw(task.param_groups(model, side), lr=s.lr, betas=s.betas, eps=s.eps,
                          fused=rc.fused_optimizer)
        warmup = math.ceil(s.warmup_ratio * total_steps)
        self.scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        for module in side:
            module.to(acc.device)
            acc.register_for_checkpointing(module)
        acc.register_for_checkpointing(self.scheduler)
        if rc.log_with:
            acc.init_trackers(f"care-{task.name}", config=_flat_scalars(task.config.to_dict()))
        if resume:
            self._resume()

        logger.info("%s: %d optimiser steps (%d warmup) on %d process(es)", task.name, total_steps, warmup,
                    acc.num_processes)
        loop_started, elapsed_before = time.perf_counter(), self.state.elapsed_s
        progress = tqdm(total=total_steps, initial=self.state.global_step, desc=task.name,
                        disable=not (rc.progress_bar and acc.is_main_process))
        schedule = CheckpointSchedule(s.checkpoint.every_steps, s.checkpoint.every_minutes, total_steps)
        self.model.train()
        for micro in task.batches(self.state, acc) if self.state.global_step < total_steps else ():
            out = task.forward_backward(self.model, micro, acc)
            if not micro.sync:
                continue
            if s.max_grad_norm is not None:
                acc.clip_grad_norm_(self.model.parameters(), s.max_grad_norm)
            self.optimizer.step()
            task.after_optimizer_step()
            if not acc.optimizer_step_was_skipped:
                self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.state.global_step += 1
            step = self.state.global_step
            loss = out if isinstance(out, torch.Tensor) else out.loss
            self.state.last_loss = float(loss.detach().float().item())
            progress.update(1)
            progress.set_postfix(loss=f"{self.state.last_loss:.4f}")
            if step % rc.log_every_steps == 0 or step in (1, total_steps):
                metrics = {"step": step, "epoch": self.state.epoch, "loss": self.state.last_loss,
                           "lr": self.scheduler.get_last_lr()[0]}
                if not isinstance(out, torch.Tensor):
                    metrics.update({f"loss/{k}": float(v) for k, v in out.components.items()})
                self._log(metrics)
            self._fire("step")
            if schedule.due(step, acc):
                self.state.elapsed_s = elapsed_before + time.perf_counter() - loop_started
                save_checkpoint(acc, self.output_dir, self.state, keep_last=s.checkpoint.keep_last)
                schedule.saved()
                self._fire("checkpoint")
            if step >= total_steps:
                break
        progress.close()
        self.state.elapsed_s = elapsed_before + time.perf_counter() - loop_started
        acc.wait_for_everyone()
        result = task.save(self.model, acc, self.state)
        if acc.is_main_process and not s.checkpoint.keep_after_training:
            remove_checkpoints(self.output_dir)
        acc.wait_for_everyone()
        if rc.log_with:
            acc.end_training()
        return result

    def _fire(self, event: str) -> None:
        for callback in self.callbacks:
            callback(self, event, self.state)


def _flat_scalars(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat_scalars(v, key + "."))
        elif isinstance(v, (int, float, str, bool)):
            out[key] = v
        elif v is not None:
            out[key] = str(v)
    return out


def train(config: TrainConfig, *, resume: bool = False, teacher: Encoder | None = None,
          callbacks: Sequence[Callback] = ()) -> TrainResult:
    """Run one stage: ``Trainer(config, teacher=..., callbacks=...).train(resume=resume)``."""
    return Trainer(config, teacher=teacher, callbacks=callbacks).train(resume=resume)
