"""The pretraining loop (RetroMAE or contrastive) on accelerate, streaming its data.

Per optimiser step: read the next global batch from the :class:`~care.pretrain.stream.TextStream`
(``batch_size`` records per process; rank ``r`` takes slice ``r``), forward + backward through the
task, clip, AdamW step, linear warmup/decay (``transformers.get_linear_schedule_with_warmup``).
Every ``checkpoint.every_steps`` steps or ``checkpoint.every_minutes`` (whichever comes first, and at the end)
:func:`care.train.engine.checkpoint.save_checkpoint` writes weights, optimizer, scheduler, every RNG state and the
stream position atomically; ``resume`` continues from the latest one, so a run killed after a checkpoint ends
with the same weights as an uninterrupted one.

Outputs in ``output_dir``: ``model/`` (the pretrained encoder as a plain ``AutoModel`` folder with its
tokenizer — use it as ``model.query_model`` of ``init_query``), ``metrics.jsonl``, ``logs/``
(TensorBoard), ``checkpoints/``, ``pretrain_config.yaml`` and ``pretrain_result.json`` (written last).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from care.errors import CareError
from care.models.folders import atomic_dir
from care.pretrain.config import PretrainConfig
from care.pretrain.stream import TextStream
from care.pretrain.tasks import PretrainTask, make_task
from care.train.engine.checkpoint import (
    STATE_FILE,
    CheckpointSchedule,
    TrainerState,
    latest_checkpoint,
    list_checkpoints,
    remove_checkpoints,
    save_checkpoint,
)
from care.train.engine.optimizer import adamw, keep_kernel_choice
from care.train.engine.trainer import NO_DECAY

logger = logging.getLogger(__name__)

RESULT_FILE = "pretrain_result.json"
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "pretrain_config.yaml"
MODEL_DIRNAME = "model"
#: Key of the stream position inside ``TrainerState.extra``.
STREAM_STATE = "stream"

#: ``callback(event, state)`` with event in {"step", "checkpoint"}.
Callback = Callable[[str, TrainerState], None]


@dataclass
class PretrainResult:
    """What a finished run produced (also ``pretrain_result.json``)."""

    method: str
    output_dir: str
    model: str
    global_step: int
    final_loss: float | None
    records_seen: int
    epochs_started: int
    extra: dict = field(default_factory=dict)


def read_pretrain_result(output_dir: str | Path) -> PretrainResult | None:
    """The result of a finished run in ``output_dir``, or ``None``."""
    path = Path(output_dir) / RESULT_FILE
    if not path.is_file():
        return None
    return PretrainResult(**json.loads(path.read_text(encoding="utf-8")))


def _optimizer(config: PretrainConfig, modules: Sequence[torch.nn.Module]) -> torch.optim.Optimizer:
    oc = config.optim
    decay, no_decay = [], []
    for module in modules:
        for name, param in module.named_parameters():
            if param.requires_grad:
                (no_decay if any(k in name for k in NO_DECAY) or param.ndim == 0 else decay).append(param)
    groups = [g for g in ({"params": decay, "weight_decay": oc.weight_decay},
                          {"params": no_decay, "weight_decay": 0.0}) if g["params"]]
    if not groups:
        raise CareError("pretraining: no trainable parameters")
    return adamw(groups, lr=oc.lr, betas=oc.betas, eps=oc.eps, fused=config.runtime.fused_optimizer)


def _truncate_metrics(path: Path, step: int) -> None:
    """After a resume, drop logged lines of steps that will be replayed."""
    from care.data.io import atomic_write

    if not path.is_file():
        return
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    with atomic_write(path) as fh:
        fh.write("".join(ln + "\n" for ln in lines if json.loads(ln).get("step", 0) <= step))


def pretrain(config: PretrainConfig, *, resume: bool = False, callbacks: Sequence[Callback] = (),
             task: PretrainTask | None = None) -> PretrainResult:
    """Run one pretraining job to the end and save ``output_dir/model``.

    Args:
        config: validated :class:`PretrainConfig`.
        resume: continue from the latest checkpoint (a finished run is returned as is). Without it,
            an ``output_dir`` holding checkpoints is an error.
        callbacks: ``callback(event, state)`` after each optimiser step / checkpoint.
        task: the objective (default: :func:`care.pretrain.tasks.make_task` of ``config.method``).
    """
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration, set_seed
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    config.validate()
    out_dir = Path(config.output_dir)
    if resume and (done := read_pretrain_result(out_dir)) is not None:
        logger.info("%s already finished (%s): nothing to do", out_dir, RESULT_FILE)
        return done
    if list_checkpoints(out_dir) and not resume:
        raise CareError(f"{out_dir} already holds checkpoints; pass --resume to continue that run, "
                        "or choose another output_dir")
    rc, oc = config.runtime, config.optim
    if rc.deterministic:
        torch.use_deterministic_algorithms(True)
    set_seed(config.seed)
    acc = Accelerator(mixed_precision=rc.mixed_precision, cpu=rc.cpu, log_with=rc.log_with,
                      project_config=ProjectConfiguration(project_dir=str(out_dir), logging_dir=str(out_dir / "logs")),
                      step_scheduler_with_optimizer=False)
    if acc.is_main_process:
        out_dir.mkdir(parents=True, exist_ok=True)
        config.save(out_dir / CONFIG_FILE)

    task = task or make_task(config)
    stream = TextStream(config.data.train_files, task.parser, seed=config.seed,
                        shuffle_buffer=config.data.shuffle_buffer)
    global_batch = oc.batch_size * acc.num_processes
    if oc.max_steps is not None:
        total_steps = oc.max_steps
    else:
        n_records = stream.count_records()
        if n_records == 0:
            raise CareError(f"{config.data.train_files}: no records to pretrain on")
        total_steps = math.ceil(n_records / global_batch) * oc.epochs
        logger.info("%d records per epoch -> %d steps over %d epoch(s)", n_records, total_steps, oc.epochs)
    warmup = math.ceil(oc.warmup_ratio * total_steps)

    model, extra = task.build()
    model.train()
    optimizer = _optimizer(config, [model] + ([extra] if extra is not None else []))
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
    task.model, optimizer = acc.prepare(model, optimizer)
    if extra is not None:
        extra.to(acc.device)
        acc.register_for_checkpointing(extra)
    acc.register_for_checkpointing(scheduler)
    if rc.log_with:
        acc.init_trackers(f"care-pretrain-{config.method}")

    state = TrainerState()
    ckpt = latest_checkpoint(out_dir) if resume else None
    if ckpt is not None:
        acc.load_state(str(ckpt))
        keep_kernel_choice(optimizer)
        state = TrainerState.load(ckpt / STATE_FILE)
        stream.load_state_dict(state.extra[STREAM_STATE])
        if acc.is_main_process:
            _truncate_metrics(out_dir / METRICS_FILE, state.global_step)
        logger.info("resumed from %s (step %d, epoch %d, %d records into it)", ckpt, state.global_step,
                    stream.epoch, stream.records)

    progress = tqdm(total=total_steps, initial=state.global_step, desc=f"pretrain {config.method}",
                    disable=not (rc.progress_bar and acc.is_main_process))
    last_loss = state.last_loss
    records_seen = int(state.extra.get("records_seen", 0))
    schedule = CheckpointSchedule(config.checkpoint.every_steps, config.checkpoint.every_minutes, total_steps)
    while state.global_step < total_steps:
        records = stream.read(global_batch)
        if len(records) < global_batch and acc.num_processes > 1:
            records = []  # ranks need equal batches: drop the epoch's ragged tail
        if not records:
            if oc.max_steps is None and stream.epoch + 1 >= oc.epochs:
                break
            stream.next_epoch()
            continue
        local = records[acc.process_index * oc.batch_size:(acc.process_index + 1) * oc.batch_size]
        out = task.step(local, acc)
        if oc.max_grad_norm is not None:
            acc.clip_grad_norm_(task.model.parameters(), oc.max_grad_norm)
        optimizer.step()
        task.after_optimizer_step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if extra is not None:
            extra.zero_grad(set_to_none=True)
        state.global_step += 1
        records_seen += len(records)
        last_loss = float(out.loss.detach().float().item())
        state.last_loss, state.epoch, state.batches_in_epoch = last_loss, stream.epoch, stream.records
        state.extra = {STREAM_STATE: stream.state_dict(), "records_seen": records_seen}
        progress.update(1)
        progress.set_postfix(loss=f"{last_loss:.4f}")
        if state.global_step % rc.log_every_steps == 0 or state.global_step in (1, total_steps):
            metrics = {"step": state.global_step, "epoch": stream.epoch, "loss": last_loss,
                       "lr": scheduler.get_last_lr()[0],
                       **{f"loss/{k}": float(v) for k, v in out.components.items()}}
            if acc.is_main_process:
                with open(out_dir / METRICS_FILE, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(metrics) + "\n")
            if rc.log_with:
                acc.log({k: v for k, v in metrics.items() if k != "step"}, step=state.global_step)
        for callback in callbacks:
            callback("step", state)
        if schedule.due(state.global_step, acc):
            save_checkpoint(acc, out_dir, state, keep_last=config.checkpoint.keep_last)
            schedule.saved()
            for callback in callbacks:
                callback("checkpoint", state)
    progress.close()

    result = PretrainResult(config.method, str(out_dir), str(out_dir / MODEL_DIRNAME), state.global_step, last_loss,
                            records_seen, stream.epoch + 1, extra=task.summary())
    acc.wait_for_everyone()
    if acc.is_main_process:
        from care.data.io import write_json

        with atomic_dir(out_dir / MODEL_DIRNAME) as tmp:
            task.save(acc.unwrap_model(task.model), tmp)
        write_json(out_dir / RESULT_FILE, asdict(result))
        logger.info("pretrained encoder saved to %s", result.model)
        if not config.checkpoint.keep_after_training:
            remove_checkpoints(out_dir)
    acc.wait_for_everyone()
    if rc.log_with:
        acc.end_training()
    return result
