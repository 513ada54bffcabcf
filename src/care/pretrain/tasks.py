"""The two pretraining objectives as :class:`~care.train.engine.task.TrainingTask` s of the engine's one loop.

:class:`PretrainTask` holds what both share: the streamed data (:class:`~care.pretrain.stream.TextStream`,
``optim.batch_size`` records per process per step; rank ``r`` takes slice ``r`` of the global batch; with
several processes an epoch's ragged tail is dropped), the step count (``optim.max_steps``, else the records
per epoch times ``optim.epochs``), the stream position in every checkpoint, AdamW's decay groups over the
encoder and its side module, and the result (``model/`` and ``pretrain_result.json``). An objective adds how
it parses its lines, builds its module, runs forward + backward on a batch of records and saves the encoder
as a plain Hugging Face folder. Pretraining does not accumulate gradients: every micro-batch is one step.
"""

from __future__ import annotations

import itertools
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from care.errors import CareError
from care.models.folders import atomic_dir
from care.pretrain.config import PretrainConfig
from care.pretrain.result import CONFIG_FILE, MODEL_DIRNAME, RESULT_FILE, PretrainResult, read_pretrain_result
from care.pretrain.stream import PairParser, Parser, TextParser, TextStream
from care.train.engine.checkpoint import TrainerState
from care.train.engine.losses.output import LossOutput
from care.train.engine.optimizer import decay_groups
from care.train.engine.task import LoopSettings, MicroBatch

logger = logging.getLogger(__name__)

#: Keys inside ``TrainerState.extra``: the stream position, and the records read so far (all ranks).
STREAM_STATE = "stream"
RECORDS_SEEN = "records_seen"


class PretrainTask(ABC):
    """What both objectives share (see the module docstring); subclasses set ``parser`` and implement
    :meth:`build_modules`, :meth:`forward_backward`, :meth:`save_encoder` and :meth:`summary`."""

    config_file = CONFIG_FILE
    parser: Parser

    def __init__(self, config: PretrainConfig) -> None:
        config.validate()
        self.config = config
        self.name = f"pretrain-{config.method}"
        o = config.optim
        self.settings = LoopSettings(Path(config.output_dir), config.seed, config.runtime, config.checkpoint, o.lr,
                                     tuple(o.betas), o.eps, o.warmup_ratio, o.max_grad_norm, o.batch_size)
        self.stream: TextStream | None = None

    # ------------------------------------------------------------------ the objective's part
    @abstractmethod
    def build_modules(self) -> tuple[nn.Module, nn.Module | None]:
        """``(model, extra)``: the module trained under DDP and an optional small one kept out of it."""

    @abstractmethod
    def forward_backward(self, model: nn.Module, micro: MicroBatch, accelerator) -> LossOutput:
        """Forward + backward of one batch of records (gradients accumulate in ``.grad``)."""

    @abstractmethod
    def save_encoder(self, model: nn.Module, path: Path) -> None:
        """Write the pretrained encoder as a plain ``AutoModel`` folder with its tokenizer."""

    def summary(self) -> dict[str, Any]:
        """Extra figures for the result file."""
        return {}

    def after_optimizer_step(self) -> None:
        return None

    # ------------------------------------------------------------------ the loop's part
    def finished(self, *, resume: bool) -> PretrainResult | None:
        if resume and (done := read_pretrain_result(self.settings.output_dir)) is not None:
            logger.info("%s already finished (%s): nothing to do", self.settings.output_dir, RESULT_FILE)
            return done
        return None

    def setup(self, accelerator) -> int:
        dc, oc = self.config.data, self.config.optim
        self.stream = TextStream(dc.train_files, self.parser, seed=self.config.seed, shuffle_buffer=dc.shuffle_buffer)
        if oc.max_steps is not None:
            return oc.max_steps
        n_records = self.stream.count_records()
        if n_records == 0:
            raise CareError(f"{dc.train_files}: no records to pretrain on")
        total = math.ceil(n_records / (oc.batch_size * accelerator.num_processes)) * oc.epochs
        logger.info("%d records per epoch -> %d steps over %d epoch(s)", n_records, total, oc.epochs)
        return total

    def build(self) -> tuple[nn.Module, list[nn.Module]]:
        model, extra = self.build_modules()
        model.train()
        return model, [] if extra is None else [extra]

    def param_groups(self, model: nn.Module, side: list[nn.Module]) -> list[dict[str, Any]]:
        oc = self.config.optim
        named = itertools.chain(model.named_parameters(), *(m.named_parameters() for m in side))
        groups = decay_groups(named, lr=oc.lr, weight_decay=oc.weight_decay)
        if not groups:
            raise CareError("pretraining: no trainable parameters")
        return groups

    def restore(self, state: TrainerState) -> None:
        self.stream.load_state_dict(state.extra[STREAM_STATE])
        logger.info("stream at epoch %d, %d records into it", self.stream.epoch, self.stream.records)

    def batches(self, state: TrainerState, accelerator) -> Iterator[MicroBatch]:
        stream, oc = self.stream, self.config.optim
        global_batch = oc.batch_size * accelerator.num_processes
        rank = accelerator.process_index
        while True:
            records = stream.read(global_batch)
            if len(records) < global_batch and accelerator.num_processes > 1:
                records = []  # ranks need equal batches: drop the epoch's ragged tail
            if not records:
                if oc.max_steps is None and stream.epoch + 1 >= oc.epochs:
                    return
                stream.next_epoch()
                continue
            state.epoch, state.batches_in_epoch = stream.epoch, stream.records
            state.extra = {STREAM_STATE: stream.state_dict(),
                           RECORDS_SEEN: int(state.extra.get(RECORDS_SEEN, 0)) + len(records)}
            yield MicroBatch(records[rank * oc.batch_size:(rank + 1) * oc.batch_size])

    def save(self, model: nn.Module, accelerator, state: TrainerState) -> PretrainResult:
        out_dir = self.settings.output_dir
        result = PretrainResult(self.config.method, str(out_dir), str(out_dir / MODEL_DIRNAME), state.global_step,
                                state.last_loss, int(state.extra.get(RECORDS_SEEN, 0)), self.stream.epoch + 1,
                                extra=self.summary())
        if accelerator.is_main_process:
            from care.data.io import write_json

            with atomic_dir(out_dir / MODEL_DIRNAME) as tmp:
                self.save_encoder(accelerator.unwrap_model(model), tmp)
            write_json(out_dir / RESULT_FILE, asdict(result))
            logger.info("pretrained encoder saved to %s", result.model)
        return result


class RetroMAETask(PretrainTask):
    """RetroMAE (:mod:`care.pretrain.retromae`) on ``.txt`` lines or JSONL ``text`` fields."""

    def __init__(self, config: PretrainConfig) -> None:
        from transformers import AutoTokenizer

        from care.pretrain.masking import RetroMAECollator

        super().__init__(config)
        self.parser = TextParser(config.data.text_field)
        mc = config.model
        self.tokenizer = AutoTokenizer.from_pretrained(mc.name_or_path, trust_remote_code=mc.trust_remote_code)
        self.collator = RetroMAECollator(self.tokenizer, config.retromae, mc.max_seq_length)

    def build_modules(self) -> tuple[nn.Module, None]:
        from care.pretrain.retromae import RetroMAEModel, load_masked_lm

        mlm = load_masked_lm(self.config.model.name_or_path, trust_remote_code=self.config.model.trust_remote_code)
        return RetroMAEModel(mlm, self.config.retromae), None

    def forward_backward(self, model: nn.Module, micro: MicroBatch, accelerator) -> LossOutput:
        batch = self.collator(micro.batch).to(accelerator.device)
        with accelerator.autocast():
            out = model(batch)
        accelerator.backward(out.loss)
        return out

    def save_encoder(self, model: nn.Module, path: Path) -> None:
        model.save_encoder(path, self.tokenizer)

    def summary(self) -> dict[str, Any]:
        r = self.config.retromae
        return {"decoding": "enhanced" if r.enhanced_decoding else "basic",
                "encoder_mask_ratio": r.encoder_mask_ratio, "decoder_mask_ratio": r.decoder_mask_ratio}


class ContrastiveTask(PretrainTask):
    """In-batch InfoNCE (:mod:`care.pretrain.contrastive`) on JSONL pairs, GradCache for large batches."""

    def __init__(self, config: PretrainConfig) -> None:
        super().__init__(config)
        self.parser = PairParser(config.data.pair_fields)
        self.loss: nn.Module | None = None

    def build_modules(self) -> tuple[nn.Module, nn.Module]:
        from care.models.query import build_query_encoder
        from care.pretrain.contrastive import EncoderModule, InBatchContrastiveLoss

        mc, cc = self.config.model, self.config.contrastive
        encoder = build_query_encoder(mc.name_or_path, pooling=mc.pooling, max_seq_length=mc.max_seq_length,
                                      trust_remote_code=mc.trust_remote_code)
        self.encoder = encoder
        self.loss = InBatchContrastiveLoss(cc.temperature, learnable=cc.learn_temperature,
                                           min_temperature=cc.min_temperature, max_temperature=cc.max_temperature,
                                           gather_across_devices=cc.gather_across_devices)
        return EncoderModule(encoder), self.loss

    def _features(self, texts: list[str], device: torch.device) -> dict[str, Any]:
        features = self.encoder.preprocess(texts)
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}

    def forward_backward(self, model: nn.Module, micro: MicroBatch, accelerator) -> LossOutput:
        from care.train.engine.gradcache import EncodeJob, grad_cache_step

        records, device = micro.batch, accelerator.device
        jobs = [EncodeJob(name, "encoder", self._features([r[i] for r in records], device), len(records))
                for i, name in enumerate(("a", "b"))]

        def encode(_tower: str, features: dict[str, Any]) -> torch.Tensor:
            with accelerator.autocast():
                return model(features)

        def loss_fn(embeddings) -> torch.Tensor:
            return self.loss(embeddings["a"].float(), embeddings["b"].float())

        chunk = self.config.contrastive.grad_cache_chunk_size
        if chunk and len(records) > chunk:
            loss = grad_cache_step(jobs, encode, loss_fn, chunk_size=chunk, backward=accelerator.backward,
                                   device=device, no_sync=lambda: accelerator.no_sync(model))
        else:
            loss = loss_fn({job.name: encode(job.tower, job.features) for job in jobs})
            accelerator.backward(loss)
        if self.loss.learnable and accelerator.num_processes > 1 and self.loss.log_temperature.grad is not None:
            grad = self.loss.log_temperature.grad  # kept out of DDP: average it by hand
            torch.distributed.all_reduce(grad)
            grad /= accelerator.num_processes
        return LossOutput(loss, {"temperature": self.loss.temperature.detach()})

    def after_optimizer_step(self) -> None:
        self.loss.clamp_()

    def save_encoder(self, model: nn.Module, path: Path) -> None:
        transformer = model.encoder[0]
        transformer.auto_model.save_pretrained(path)
        transformer.tokenizer.save_pretrained(path)

    def summary(self) -> dict[str, Any]:
        return {"temperature": float(self.loss.temperature.detach()), "learn_temperature": self.loss.learnable,
                "pooling": self.config.model.pooling}


def make_task(config: PretrainConfig) -> PretrainTask:
    """The task of ``config.method``."""
    return {"retromae": RetroMAETask, "contrastive": ContrastiveTask}[config.method](config)
