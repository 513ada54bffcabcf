"""A CARE training stage as a :class:`~care.train.engine.task.TrainingTask` of the one loop.

One :class:`StageTask` is one :class:`~care.train.engine.config.TrainConfig`: its training file in
deterministic per-epoch batches (:mod:`care.train.engine.batches`, gradient accumulation over
``optim.gradient_accumulation_steps`` micro-batches), the frozen teacher's cached embeddings, the trainable
towers (:class:`~care.train.engine.towers.Towers`), the stage's loss (:mod:`care.train.engine.stage`) with
GradCache for large contrastive batches and optional layer-wise distillation, and the stage's outputs.

Outputs in ``output_dir``: ``query/`` and/or ``document/`` (trained towers as SentenceTransformer
folders), ``model/`` (the combined CARE model when both towers exist), ``train_config.yaml`` and
``train_result.json`` (written last; its presence marks the stage as finished). The loop adds
``metrics.jsonl``, ``logs/`` and ``checkpoints/``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from care.encoders.base import Encoder
from care.errors import CareError, DimensionMismatchError
from care.models.folders import atomic_dir
from care.train.engine.checkpoint import TrainerState
from care.train.engine.config import TrainConfig
from care.train.engine.optimizer import decay_groups
from care.train.engine.stage import DOCUMENT_TOWER, QUERY_TOWER, TEACHER, StageSpec, build_stage
from care.train.engine.task import LoopSettings, MicroBatch

logger = logging.getLogger(__name__)

RESULT_FILE = "train_result.json"
CONFIG_FILE = "train_config.yaml"


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


def loop_settings(config: TrainConfig) -> LoopSettings:
    """The loop's settings of a stage config."""
    o = config.optim
    return LoopSettings(Path(config.output_dir), config.seed, config.runtime, config.checkpoint, o.lr, tuple(o.betas),
                        o.eps, o.warmup_ratio, o.max_grad_norm, o.batch_size, o.gradient_accumulation_steps)


class StageTask:
    """One training stage for :class:`care.train.engine.trainer.Trainer`.

    Args:
        config: the stage's configuration (validated here).
        teacher: for stages with a teacher, an already-built frozen :class:`Encoder` to use instead of
            ``config.model.teacher`` (e.g. a fake encoder in tests, or a loaded e5).
    """

    config_file = CONFIG_FILE

    def __init__(self, config: TrainConfig, *, teacher: Encoder | None = None) -> None:
        config.validate()
        self.config = config
        self.name = config.stage
        self.settings = loop_settings(config)
        self.stage: StageSpec = build_stage(config)
        self.teacher = teacher
        self.output_dir = Path(config.output_dir)
        # built in setup() / build()
        self.accelerator = None
        self.examples = None
        self.per_epoch = 0
        self.total_steps = 0
        self.teacher_embeddings = None
        self.frozen_document_path: str | None = None
        self.layer_distiller = None

    # ------------------------------------------------------------------ the run's inputs
    def finished(self, *, resume: bool) -> TrainResult | None:
        done = read_result(self.output_dir)
        if done is None or not done.completed:
            return None
        if not resume:
            raise CareError(f"{self.output_dir} holds a finished stage ({RESULT_FILE}); pass --resume to "
                            "reuse it, or choose another output_dir")
        logger.info("%s already finished (%s): nothing to do", self.output_dir, RESULT_FILE)
        return done

    def setup(self, accelerator) -> int:
        from care.data.training import TrainingFile
        from care.train.engine.batches import batches_per_epoch

        cfg, self.accelerator = self.config, accelerator
        self.examples = TrainingFile(cfg.data.train_file, max_examples=cfg.data.max_examples)
        if self.stage.uses_teacher:
            self._prepare_teacher(self.examples)
        self.per_epoch = batches_per_epoch(self.examples.kinds, cfg.optim.batch_size, accelerator.num_processes)
        if self.per_epoch == 0:
            raise CareError(f"{cfg.data.train_file}: too few rows for one batch of {cfg.optim.batch_size} "
                            f"per process on {accelerator.num_processes} process(es)")
        steps_per_epoch = math.ceil(self.per_epoch / cfg.optim.gradient_accumulation_steps)
        self.total_steps = cfg.optim.max_steps or steps_per_epoch * cfg.optim.epochs
        logger.info("stage %s: %d rows, %d batches/epoch/process, %d optimiser steps, %d process(es)",
                    cfg.stage, len(self.examples), self.per_epoch, self.total_steps, accelerator.num_processes)
        return self.total_steps

    def _build_teacher(self) -> Encoder:
        if self.teacher is not None:
            return self.teacher
        from care.encoders.fingerprint import folder_fingerprint
        from care.train.engine.teacher import TowerEncoder, load_factory
        from care.train.engine.towers import is_sentence_transformer_folder, load_document_tower

        tc, mc = self.config.model.teacher, self.config.model
        if tc.kind == "document":
            # encode on the training device (a frozen tower is loaded on the CPU)
            tower = load_document_tower(mc, trainable=False).to(self.accelerator.device)
            self.frozen_document_path = mc.document_model
            settings: dict[str, object] = {"document_prompt": mc.document_prompt} if mc.document_prompt else {}
            if not is_sentence_transformer_folder(mc.document_model):  # a plain folder is pooled as the config says
                settings["pooling"] = mc.document_pooling
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

    # ------------------------------------------------------------------ what trains
    def build(self) -> tuple[torch.nn.Module, list[torch.nn.Module]]:
        from care.train.engine.towers import (
            Towers,
            enable_gradient_checkpointing,
            load_document_tower,
            load_query_tower,
        )

        towers: dict[str, Any] = {}
        mc = self.config.model
        if QUERY_TOWER in self.stage.trainable_towers:
            from care.train.engine.static_query import static_query_texts

            towers[QUERY_TOWER] = load_query_tower(
                mc, weight_texts=lambda: static_query_texts(self.examples, mc.query_prompt))
        if DOCUMENT_TOWER in self.stage.trainable_towers:
            towers[DOCUMENT_TOWER] = load_document_tower(mc, trainable=True)
        for model in towers.values():
            model.train()
            if mc.gradient_checkpointing and hasattr(model[0], "auto_model"):  # a static tower has no activations
                enable_gradient_checkpointing(model)
        self._check_dims(towers)
        self.layer_distiller = self._layer_distiller(towers)
        return Towers(towers), []

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

    def param_groups(self, model: torch.nn.Module, side: list[torch.nn.Module]) -> list[dict[str, Any]]:
        """Weight decay except biases / norms; the document tower in groups of its own at ``optim.document_lr``
        when that is set (each group's lr is then scaled by the schedule). Unset, the groups are the two of
        earlier versions, so their checkpoints resume."""
        oc = self.config.optim
        prefix = f"towers.{DOCUMENT_TOWER}."
        own_lr = (lambda name: oc.document_lr if name.startswith(prefix) else None) if oc.document_lr else None
        groups = decay_groups(model.named_parameters(), lr=oc.lr, weight_decay=oc.weight_decay, own_lr=own_lr)
        if not groups:
            raise CareError(f"stage {self.config.stage}: no trainable parameters")
        return groups

    # ------------------------------------------------------------------ the steps
    def restore(self, state: TrainerState) -> None:
        return None  # a batch depends only on (seed, epoch, position): the state says it all

    def batches(self, state: TrainerState, accelerator) -> Iterator[MicroBatch]:
        from care.train.engine.batches import epoch_loader

        cfg, per_epoch = self.config, self.per_epoch
        accum = cfg.optim.gradient_accumulation_steps
        epochs = math.ceil(self.total_steps / math.ceil(per_epoch / accum))
        while state.epoch < epochs:
            loader = epoch_loader(self.examples, self.examples.kinds, batch_size=cfg.optim.batch_size,
                                  n_negatives=cfg.data.n_negatives, seed=cfg.seed, epoch=state.epoch,
                                  shuffle=cfg.data.shuffle, num_replicas=accelerator.num_processes,
                                  rank=accelerator.process_index, skip_batches=state.batches_in_epoch,
                                  num_workers=cfg.data.num_workers)
            for batch in loader:
                position = state.batches_in_epoch + 1
                group = accum if position <= per_epoch - per_epoch % accum else per_epoch % accum
                state.batches_in_epoch = position
                yield MicroBatch(batch, 1.0 / group, position % accum == 0 or position == per_epoch)
            state.epoch += 1
            state.batches_in_epoch = 0

    def _tokenize(self, model, tower: str, texts: list[str]) -> dict[str, Any]:
        features = self.accelerator.unwrap_model(model).towers[tower].preprocess(texts)
        device = self.accelerator.device
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}

    def forward_backward(self, model, micro: MicroBatch, accelerator):
        """Encode, compute the stage loss and back-propagate one batch; returns the loss output."""
        from care.train.engine.gradcache import EncodeJob, grad_cache_step

        acc, batch = accelerator, micro.batch
        texts = self.stage.batch_texts(batch, self.config.model.query_prompt, self.config.model.document_prompt)
        k = batch.n_negatives
        fixed: dict[str, torch.Tensor] = {}
        jobs: list[EncodeJob] = []
        for name in texts:
            tower = self.stage.field_towers[name]
            if tower == TEACHER:
                fixed[name] = self.teacher_embeddings.lookup(texts[name]).to(acc.device)
            else:
                jobs.append(EncodeJob(name, tower, self._tokenize(model, tower, texts[name]), len(texts[name])))

        distiller, taps = self.layer_distiller, None
        query_job = next((job for job in jobs if job.name == "query"), None) if distiller is not None else None

        def encode(tower: str, features: dict[str, Any]) -> torch.Tensor:
            return model(tower, features)

        def loss_fn(embeddings):
            out = self.stage.compute_loss({**embeddings, **fixed}, k)
            if taps is None:
                return out
            return _with_layer_terms(out, distiller.terms(taps, query_job.features))

        def backward(loss: torch.Tensor) -> None:
            acc.backward(loss * micro.loss_scale)

        sync_ctx = contextlib.nullcontext() if micro.sync else acc.no_sync(model)
        chunk = self.config.optim.grad_cache_chunk_size
        with sync_ctx:
            if chunk and any(job.n_rows > chunk for job in jobs):
                return grad_cache_step(jobs, encode, loss_fn, chunk_size=chunk, backward=backward,
                                       device=acc.device, no_sync=lambda: acc.no_sync(model))
            embeddings = {}
            for job in jobs:
                if job is query_job:
                    with distiller.student_taps(acc.unwrap_model(model).towers[QUERY_TOWER]) as taps:
                        embeddings[job.name] = encode(job.tower, job.features)
                else:
                    embeddings[job.name] = encode(job.tower, job.features)
            out = loss_fn(embeddings)
            backward(out if isinstance(out, torch.Tensor) else out.loss)
            return out

    def after_optimizer_step(self) -> None:
        return None

    # ------------------------------------------------------------------ outputs
    def save(self, model, accelerator, state: TrainerState) -> TrainResult:
        from care.train.engine.towers import load_document_tower, save_tower

        acc = accelerator
        result = TrainResult(self.config.stage, str(self.output_dir), state.global_step, state.last_loss,
                             train_seconds=round(state.elapsed_s, 3))
        if not acc.is_main_process:
            return result
        towers = dict(acc.unwrap_model(model).towers.items())
        merge = self.config.model.merge_lora_on_save
        for name, tower in towers.items():
            path = _atomic_dir(self.output_dir / name, lambda tmp, m=tower: self._with_prompts(
                save_tower(m, tmp, merge_lora=merge)))
            setattr(result, f"{name}_model", str(path))
        document = towers.get(DOCUMENT_TOWER)
        if (document is None and self.frozen_document_path is not None and QUERY_TOWER in towers
                and not self.stage.teacher_scores_only):
            document = load_document_tower(self.config.model, trainable=False, path=self.frozen_document_path)
            result.document_model = self.frozen_document_path
        if QUERY_TOWER in towers and document is not None:
            from care.models.asymmetric import build_care_model, save_care_model
            from care.train.engine.static_query import exportable

            combined = build_care_model(exportable(towers[QUERY_TOWER]), document)  # a static tower: its lookup form
            result.care_model = str(self._with_prompts(save_care_model(combined, self.output_dir / "model",
                                                                      merge_lora=merge)))
        from care.data.io import write_json

        write_json(self.output_dir / RESULT_FILE, asdict(result))
        return result

    def _with_prompts(self, folder: Path) -> Path:
        """``folder`` with the stage's prompts stored in it when ``model.save_prompts`` (else unchanged)."""
        model = self.config.model
        if model.save_prompts:
            from care.encoders.stored_prompts import write_stored_prompts

            write_stored_prompts(folder, model.query_prompt, model.document_prompt)
        return Path(folder)


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
