"""The training loop shared by every stage, on accelerate.

One :class:`Trainer` runs one :class:`~care.train.engine.config.TrainConfig` stage on CPU, one GPU or many
(``torchrun`` / ``accelerate launch``: DistributedDataParallel, optional DeepSpeed ZeRO), with
bf16/fp16 autocast, gradient checkpointing, GradCache for large contrastive batches, atomic
checkpoints every N steps and exact resume (weights, optimizer, scheduler, RNG and data position).

Outputs in ``output_dir``: ``query/`` and/or ``document/`` (trained towers as SentenceTransformer
folders), ``model/`` (the combined CARE model when both towers exist), ``metrics.jsonl`` (one line
per logged step), ``logs/`` (TensorBoard), ``checkpoints/`` and ``train_result.json`` (written last;
its presence marks the stage as finished).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from care.encoders.base import Encoder
from care.errors import CareError, DimensionMismatchError
from care.models.folders import atomic_dir
from care.train.engine.checkpoint import (
    CheckpointSchedule,
    TrainerState,
    latest_checkpoint,
    list_checkpoints,
    remove_checkpoints,
    save_checkpoint,
)
from care.train.engine.config import TrainConfig
from care.train.engine.optimizer import adamw, keep_kernel_choice
from care.train.engine.stage import DOCUMENT_TOWER, QUERY_TOWER, TEACHER, StageSpec, build_stage

logger = logging.getLogger(__name__)

RESULT_FILE = "train_result.json"
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "train_config.yaml"
#: Parameter-name fragments exempt from weight decay (HF convention).
NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")

#: ``callback(trainer, event, state)`` with event in {"step", "checkpoint"}.
Callback = Callable[["Trainer", str, TrainerState], None]


@dataclass
class TrainResult:
    """What a finished stage produced (also written to ``train_result.json``)."""

    stage: str
    output_dir: str
    global_step: int
    final_loss: float | None
    query_model: str | None = None
    document_model: str | None = None
    care_model: str | None = None
    completed: bool = True
    #: wall time of the training loop, summed over interrupted runs (None in results written before it existed)
    train_seconds: float | None = None
    extra: dict = field(default_factory=dict)


def read_result(output_dir: str | Path) -> TrainResult | None:
    """The :class:`TrainResult` of a finished stage in ``output_dir``, or ``None``."""
    path = Path(output_dir) / RESULT_FILE
    if not path.is_file():
        return None
    return TrainResult(**json.loads(path.read_text(encoding="utf-8")))


class Trainer:
    """Run one training stage.

    Args:
        config: the stage's configuration (validated).
        teacher: for ``stage1``/``stage1_sft``, an already-built frozen :class:`Encoder` to use
            instead of ``config.model.teacher`` (e.g. a fake encoder in tests, or a loaded e5).
        callbacks: called after every optimiser step (``"step"``) and checkpoint (``"checkpoint"``).
    """

    def __init__(self, config: TrainConfig, *, teacher: Encoder | None = None,
                 callbacks: Sequence[Callback] = ()) -> None:
        config.validate()
        self.config = config
        self.stage: StageSpec = build_stage(config)
        self.teacher = teacher
        self.callbacks = list(callbacks)
        self.output_dir = Path(config.output_dir)
        self.state = TrainerState()
        # built in train()
        self.accelerator = None
        self.model = None
        self.optimizer = None
        self.scheduler = None
        self.teacher_embeddings = None
        self.frozen_document_path: str | None = None
        self.layer_distiller = None

    # ------------------------------------------------------------------ setup
    def _make_accelerator(self):
        from accelerate import Accelerator
        from accelerate.utils import DeepSpeedPlugin, DistributedDataParallelKwargs, ProjectConfiguration

        rc = self.config.runtime
        plugin = None
        if rc.deepspeed_config:
            if self.config.optim.grad_cache_chunk_size:
                raise CareError("config field 'optim.grad_cache_chunk_size': GradCache is not supported with DeepSpeed; "
                                "use DDP (no runtime.deepspeed_config) or drop the chunk size")
            ds = json.loads(Path(rc.deepspeed_config).read_text(encoding="utf-8"))
            ds["train_micro_batch_size_per_gpu"] = self.config.optim.batch_size
            ds["gradient_accumulation_steps"] = self.config.optim.gradient_accumulation_steps
            if self.config.optim.max_grad_norm is not None:
                ds["gradient_clipping"] = self.config.optim.max_grad_norm
            ds.pop("train_batch_size", None)
            plugin = DeepSpeedPlugin(hf_ds_config=ds)
        return Accelerator(
            mixed_precision=rc.mixed_precision,
            cpu=rc.cpu,
            log_with=rc.log_with,
            project_config=ProjectConfiguration(project_dir=str(self.output_dir), logging_dir=str(self.output_dir / "logs")),
            deepspeed_plugin=plugin,
            step_scheduler_with_optimizer=False,
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=rc.find_unused_parameters)],
        )

    def _load_examples(self):
        from care.data.training import TrainingFile

        return TrainingFile(self.config.data.train_file, max_examples=self.config.data.max_examples)

    def _build_teacher(self) -> Encoder:
        if self.teacher is not None:
            return self.teacher
        from care.encoders.fingerprint import folder_fingerprint
        from care.train.engine.teacher import TowerEncoder, load_factory
        from care.train.engine.towers import load_document_tower

        tc, mc = self.config.model.teacher, self.config.model
        if tc.kind == "document":
            # encode on the training device (a frozen tower is loaded on the CPU)
            tower = load_document_tower(mc, trainable=False).to(self.accelerator.device)
            self.frozen_document_path = mc.document_model
            settings = {"document_prompt": mc.document_prompt} if mc.document_prompt else {}
            fp = folder_fingerprint(mc.document_model, output_dim=tower.get_embedding_dimension(),
                                    max_seq_length=mc.document_max_seq_length, **settings)
            return TowerEncoder(tower, f"document:{Path(mc.document_model).name}", fp,
                                document_prompt=mc.document_prompt)
        if tc.kind == "encoder":
            from care.encoders.registry import load_model

            return load_model(tc.spec)
        return load_factory(tc.factory)

    def _bank_texts(self, examples) -> list[str]:
        """The candidate bank's documents (``bank_distill``), empty for other stages."""
        if not self.stage.candidate_bank:
            return []
        cfg = self.config
        return self.stage.bank_texts(examples, cfg.loss.bank_size, cfg.seed, cfg.data.bank_file)

    def _prepare_teacher(self, examples) -> None:
        from care.train.engine.teacher import TeacherEmbeddings

        acc = self.accelerator
        cache_dir = self.config.model.teacher.cache_dir or str(self.output_dir / "teacher_cache")
        bank = self._bank_texts(examples)
        texts = self.stage.teacher_texts(examples, self.config.model.query_prompt, bank)
        teacher = self._build_teacher()
        with acc.main_process_first():  # rank 0 encodes and caches; the others read the cache
            self.teacher_embeddings = TeacherEmbeddings.compute(
                self.stage.teacher_encoder(teacher, self.config.model.query_prompt), texts, cache_dir,
                batch_size=self.config.model.teacher.batch_size,
                show_progress=self.config.runtime.progress_bar and acc.is_main_process)
        if teacher is not self.teacher:
            del teacher  # the frozen model is not needed any more: free its memory
        if self.stage.candidate_bank:
            self.stage.set_candidate_bank(self.teacher_embeddings.lookup(bank).to(acc.device))
            logger.info("candidate bank: the teacher's vectors of %d documents", len(bank))

    def _build_towers(self) -> dict[str, Any]:
        from care.train.engine.towers import enable_gradient_checkpointing, load_document_tower, load_query_tower

        towers: dict[str, Any] = {}
        mc = self.config.model
        if QUERY_TOWER in self.stage.trainable_towers:
            towers[QUERY_TOWER] = load_query_tower(mc)
        if DOCUMENT_TOWER in self.stage.trainable_towers:
            towers[DOCUMENT_TOWER] = load_document_tower(mc, trainable=True)
        for model in towers.values():
            model.train()
            if mc.gradient_checkpointing:
                enable_gradient_checkpointing(model)
        return towers

    def _layer_distiller(self, towers: dict[str, Any]):
        """The frozen deep model the query tower distills layer-wise, when the loss asks for it (else ``None``)."""
        from care.train.engine.layer_distill import LayerDistiller, LayerDistillSettings, load_layer_teacher

        lo, mc = self.config.loss, self.config.model
        settings = LayerDistillSettings(lo.lambda_hidden, lo.lambda_relations, lo.relation_heads, lo.relation_layer)
        if not settings.active:
            return None
        path = mc.layer_teacher or mc.document_model
        logger.info("stage %s: the query tower distills the layers of %s (hidden %.3g, relations %.3g)",
                    self.config.stage, path, lo.lambda_hidden, lo.lambda_relations)
        teacher = load_layer_teacher(str(path), trust_remote_code=mc.trust_remote_code)
        return LayerDistiller(teacher, towers[QUERY_TOWER], settings)  # it follows the batch's device

    def _check_dims(self, towers: dict[str, Any]) -> None:
        dims = {name: int(m.get_embedding_dimension()) for name, m in towers.items()}
        if self.teacher_embeddings is not None and not self.stage.teacher_scores_only:
            dims[TEACHER] = self.teacher_embeddings.dim
        if len(set(dims.values())) > 1:
            raise DimensionMismatchError(
                f"stage {self.config.stage}: embedding widths differ {dims}; set model.output_dim to the query "
                "encoder's width (Matryoshka cut of the document side) or use a query encoder of the teacher's width"
            )

    def _optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """AdamW over the trainable parameters: weight decay except biases / norms; the document
        tower in groups of its own at ``optim.document_lr`` when that is set (each group's lr is then
        scaled by the schedule). Unset, the groups are the two of earlier versions, so their
        checkpoints resume."""
        oc = self.config.optim
        groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
        document_prefix = f"towers.{DOCUMENT_TOWER}."
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            own_lr = oc.document_lr is not None and name.startswith(document_prefix)
            key = (own_lr, not any(k in name for k in NO_DECAY))
            groups.setdefault(key, []).append(param)
        if not groups:
            raise CareError(f"stage {self.config.stage}: no trainable parameters")
        param_groups = [{"params": groups[(own_lr, decay)], "weight_decay": oc.weight_decay if decay else 0.0,
                         "lr": oc.document_lr if own_lr else oc.lr}
                        for own_lr in (False, True) for decay in (True, False) if (own_lr, decay) in groups]
        return adamw(param_groups, lr=oc.lr, betas=oc.betas, eps=oc.eps, fused=self.config.runtime.fused_optimizer)

    # ------------------------------------------------------------------ one step
    def _tokenize(self, tower: str, texts: list[str]) -> dict[str, Any]:
        model = self.accelerator.unwrap_model(self.model).towers[tower]
        features = model.preprocess(texts)
        device = self.accelerator.device
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}

    def _encode(self, tower: str, features: dict[str, Any]) -> torch.Tensor:
        return self.model(tower, features)

    def _forward_backward(self, batch, loss_scale: float, sync: bool):
        """Encode, compute the stage loss and back-propagate one batch; returns the loss output."""
        from care.train.engine.gradcache import EncodeJob, grad_cache_step

        acc = self.accelerator
        texts = self.stage.batch_texts(batch, self.config.model.query_prompt, self.config.model.document_prompt)
        k = batch.n_negatives
        fixed: dict[str, torch.Tensor] = {}
        jobs: list[EncodeJob] = []
        for name in texts:
            tower = self.stage.field_towers[name]
            if tower == TEACHER:
                fixed[name] = self.teacher_embeddings.lookup(texts[name]).to(acc.device)
            else:
                jobs.append(EncodeJob(name, tower, self._tokenize(tower, texts[name]), len(texts[name])))

        distiller, taps = self.layer_distiller, None
        query_job = next((job for job in jobs if job.name == "query"), None) if distiller is not None else None

        def loss_fn(embeddings):
            out = self.stage.compute_loss({**embeddings, **fixed}, k)
            if taps is None:
                return out
            return _with_layer_terms(out, distiller.terms(taps, query_job.features))

        def backward(loss: torch.Tensor) -> None:
            acc.backward(loss * loss_scale)

        sync_ctx = contextlib.nullcontext() if sync else acc.no_sync(self.model)
        chunk = self.config.optim.grad_cache_chunk_size
        with sync_ctx:
            if chunk and any(job.n_rows > chunk for job in jobs):
                return grad_cache_step(jobs, self._encode, loss_fn, chunk_size=chunk, backward=backward,
                                       device=acc.device, no_sync=lambda: acc.no_sync(self.model))
            embeddings = {}
            for job in jobs:
                if job is query_job:
                    with distiller.student_taps(acc.unwrap_model(self.model).towers[QUERY_TOWER]) as taps:
                        embeddings[job.name] = self._encode(job.tower, job.features)
                else:
                    embeddings[job.name] = self._encode(job.tower, job.features)
            out = loss_fn(embeddings)
            backward(out if isinstance(out, torch.Tensor) else out.loss)
            return out

    # ------------------------------------------------------------------ bookkeeping
    def _log(self, metrics: dict[str, float]) -> None:
        acc = self.accelerator
        if acc.is_main_process:
            with open(self.output_dir / METRICS_FILE, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(metrics) + "\n")
        if self.config.runtime.log_with:
            acc.log({k: v for k, v in metrics.items() if k != "step"}, step=int(metrics["step"]))

    def _truncate_metrics(self, step: int) -> None:
        """After a resume, drop logged lines of steps that will be replayed."""
        from care.data.io import atomic_write

        path = self.output_dir / METRICS_FILE
        if not path.is_file() or not self.accelerator.is_main_process:
            return
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        keep = [ln for ln in lines if json.loads(ln).get("step", 0) <= step]
        with atomic_write(path) as fh:
            fh.write("".join(ln + "\n" for ln in keep))

    def _save_outputs(self, final_loss: float | None) -> TrainResult:
        from care.train.engine.towers import load_document_tower, save_tower

        acc = self.accelerator
        result = TrainResult(self.config.stage, str(self.output_dir), self.state.global_step, final_loss,
                             train_seconds=round(self.state.elapsed_s, 3))
        acc.wait_for_everyone()
        if acc.is_main_process:
            towers = dict(acc.unwrap_model(self.model).towers.items())
            merge = self.config.model.merge_lora_on_save
            for name, model in towers.items():
                path = _atomic_dir(self.output_dir / name, lambda tmp, m=model: self._with_prompts(
                    save_tower(m, tmp, merge_lora=merge)))
                setattr(result, f"{name}_model", str(path))
            document = towers.get(DOCUMENT_TOWER)
            if (document is None and self.frozen_document_path is not None and QUERY_TOWER in towers
                    and not self.stage.teacher_scores_only):
                document = load_document_tower(self.config.model, trainable=False, path=self.frozen_document_path)
                result.document_model = self.frozen_document_path
            if QUERY_TOWER in towers and document is not None:
                from care.models.asymmetric import build_care_model, save_care_model

                combined = build_care_model(towers[QUERY_TOWER], document)
                result.care_model = str(self._with_prompts(save_care_model(combined, self.output_dir / "model",
                                                                          merge_lora=merge)))
            from care.data.io import write_json

            write_json(self.output_dir / RESULT_FILE, asdict(result))
            if not self.config.checkpoint.keep_after_training:
                remove_checkpoints(self.output_dir)
        acc.wait_for_everyone()
        return result

    def _with_prompts(self, folder: Path) -> Path:
        """``folder`` with the stage's prompts stored in it when ``model.save_prompts`` (else unchanged)."""
        model = self.config.model
        if model.save_prompts:
            from care.encoders.stored_prompts import write_stored_prompts

            write_stored_prompts(folder, model.query_prompt, model.document_prompt)
        return Path(folder)

    # ------------------------------------------------------------------ main loop
    def train(self, *, resume: bool = False) -> TrainResult:
        """Run the stage to the end (``optim.epochs`` or ``optim.max_steps``) and save the outputs.

        Args:
            resume: continue from the latest complete checkpoint in ``output_dir/checkpoints``, or
                return the recorded result when the stage already finished there. Without it, an
                output folder that already holds checkpoints or a finished stage is an error.
        """
        from accelerate.utils import set_seed
        from tqdm.auto import tqdm
        from transformers import get_linear_schedule_with_warmup

        from care.train.engine.batches import batches_per_epoch, epoch_loader

        cfg = self.config
        finished = read_result(self.output_dir)
        if finished is not None and finished.completed:
            if not resume:
                raise CareError(f"{self.output_dir} holds a finished stage ({RESULT_FILE}); pass --resume to "
                                "reuse it, or choose another output_dir")
            logger.info("%s already finished (%s): nothing to do", self.output_dir, RESULT_FILE)
            return finished
        if list_checkpoints(self.output_dir) and not resume:
            raise CareError(f"{self.output_dir} already holds checkpoints; pass --resume to continue that run, "
                            "or choose another output_dir")
        if cfg.runtime.deterministic:
            torch.use_deterministic_algorithms(True)
        set_seed(cfg.seed)
        acc = self.accelerator = self._make_accelerator()
        if acc.is_main_process:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            cfg.save(self.output_dir / CONFIG_FILE)

        examples = self._load_examples()
        kinds = examples.kinds
        if self.stage.uses_teacher:
            self._prepare_teacher(examples)
        towers = self._build_towers()
        self._check_dims(towers)
        self.layer_distiller = self._layer_distiller(towers)
        from care.train.engine.towers import Towers

        model = Towers(towers)
        optimizer = self._optimizer(model)
        accum = cfg.optim.gradient_accumulation_steps
        per_epoch = batches_per_epoch(kinds, cfg.optim.batch_size, acc.num_processes)
        if per_epoch == 0:
            raise CareError(f"{cfg.data.train_file}: too few rows for one batch of {cfg.optim.batch_size} "
                            f"per process on {acc.num_processes} process(es)")
        steps_per_epoch = math.ceil(per_epoch / accum)
        total_steps = cfg.optim.max_steps or steps_per_epoch * cfg.optim.epochs
        epochs = math.ceil(total_steps / steps_per_epoch)
        warmup = math.ceil(cfg.optim.warmup_ratio * total_steps)
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        self.scheduler = scheduler
        acc.register_for_checkpointing(scheduler)
        if cfg.runtime.log_with:
            acc.init_trackers(f"care-{cfg.stage}", config=_flat_scalars(cfg.to_dict()))

        ckpt = latest_checkpoint(self.output_dir) if resume else None
        if ckpt is not None:
            acc.load_state(str(ckpt))
            keep_kernel_choice(self.optimizer)
            self.state = TrainerState.load(ckpt / "trainer_state.json")
            self._truncate_metrics(self.state.global_step)
            logger.info("resumed from %s (step %d, epoch %d, batch %d)", ckpt, self.state.global_step,
                        self.state.epoch, self.state.batches_in_epoch)
        elif resume:
            logger.info("no checkpoint in %s: starting from scratch", self.output_dir)

        logger.info("stage %s: %d rows, %d batches/epoch/process, %d optimiser steps (%d warmup), %d process(es)",
                    cfg.stage, len(examples), per_epoch, total_steps, warmup, acc.num_processes)
        loop_started, elapsed_before = time.perf_counter(), self.state.elapsed_s
        progress = tqdm(total=total_steps, initial=self.state.global_step, desc=cfg.stage,
                        disable=not (cfg.runtime.progress_bar and acc.is_main_process))
        last_loss = self.state.last_loss
        schedule = CheckpointSchedule(cfg.checkpoint.every_steps, cfg.checkpoint.every_minutes, total_steps)
        self.model.train()
        while self.state.global_step < total_steps and self.state.epoch < epochs:
            loader = epoch_loader(examples, kinds, batch_size=cfg.optim.batch_size, n_negatives=cfg.data.n_negatives,
                                  seed=cfg.seed, epoch=self.state.epoch, shuffle=cfg.data.shuffle,
                                  num_replicas=acc.num_processes, rank=acc.process_index,
                                  skip_batches=self.state.batches_in_epoch, num_workers=cfg.data.num_workers)
            for batch in loader:
                position = self.state.batches_in_epoch + 1
                sync = position % accum == 0 or position == per_epoch
                group = accum if position <= per_epoch - per_epoch % accum else per_epoch % accum
                out = self._forward_backward(batch, 1.0 / group, sync)
                self.state.batches_in_epoch = position
                if not sync:
                    continue
                if cfg.optim.max_grad_norm is not None:
                    acc.clip_grad_norm_(self.model.parameters(), cfg.optim.max_grad_norm)
                self.optimizer.step()
                if not acc.optimizer_step_was_skipped:
                    self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.state.global_step += 1
                loss = out if isinstance(out, torch.Tensor) else out.loss
                last_loss = float(loss.detach().float().item())
                self.state.last_loss = last_loss
                progress.update(1)
                progress.set_postfix(loss=f"{last_loss:.4f}")
                if self.state.global_step % cfg.runtime.log_every_steps == 0 or self.state.global_step == 1:
                    metrics = {"step": self.state.global_step, "epoch": self.state.epoch, "loss": last_loss,
                               "lr": self.scheduler.get_last_lr()[0]}
                    if not isinstance(out, torch.Tensor):
                        metrics.update({f"loss/{k}": float(v) for k, v in out.components.items()})
                    self._log(metrics)
                self._fire("step")
                if schedule.due(self.state.global_step, acc):
                    self.state.elapsed_s = elapsed_before + time.perf_counter() - loop_started
                    save_checkpoint(acc, self.output_dir, self.state, keep_last=cfg.checkpoint.keep_last)
                    schedule.saved()
                    self._fire("checkpoint")
                if self.state.global_step >= total_steps:
                    break
            else:
                self.state.epoch += 1
                self.state.batches_in_epoch = 0
                continue
            break
        progress.close()
        self.state.elapsed_s = elapsed_before + time.perf_counter() - loop_started
        result = self._save_outputs(last_loss)
        if cfg.runtime.log_with:
            acc.end_training()
        return result

    def _fire(self, event: str) -> None:
        for callback in self.callbacks:
            callback(self, event, self.state)


def _with_layer_terms(out: Any, terms: dict[str, tuple[float, torch.Tensor]]) -> Any:
    """The stage's loss output plus the weighted layer-distillation terms (:mod:`care.train.engine.layer_distill`)."""
    from care.train.engine.losses.output import LossOutput

    total, components = (out.loss, dict(out.components)) if isinstance(out, LossOutput) else (out, {"stage": out.detach()})
    for name, (weight, value) in terms.items():
        total = total + weight * value
        components[name] = value.detach()
    return LossOutput(total, components)


def _atomic_dir(target: Path, write: Callable[[Path], Any]) -> Path:
    """Write a folder into a temporary sibling, then swap it into ``target`` (:func:`care.models.folders.atomic_dir`)."""
    with atomic_dir(target) as tmp:
        write(tmp)
    return target


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
