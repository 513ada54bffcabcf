"""The two pretraining objectives as tasks the loop in :mod:`care.pretrain.trainer` runs.

A task knows how to parse its input lines, build the trainable module (and any extra module kept
outside DistributedDataParallel, e.g. a learnable temperature), run forward + backward on a list of
records, and save the encoder as a plain Hugging Face folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from care.pretrain.config import PretrainConfig
from care.pretrain.stream import PairParser, Parser, TextParser
from care.train.engine.losses.output import LossOutput

logger = logging.getLogger(__name__)


class PretrainTask(Protocol):
    """What :func:`care.pretrain.trainer.pretrain` needs from an objective.

    ``model`` is set by the loop to the prepared (possibly DDP-wrapped) module that :meth:`build`
    returned; :meth:`step` runs it.
    """

    parser: Parser
    model: nn.Module

    def build(self) -> tuple[nn.Module, nn.Module | None]:
        """``(model, extra)``: the module to wrap for (distributed) training and an optional small module
        trained alongside it but kept out of DDP (checkpointed too)."""

    def step(self, records: list[Any], accelerator) -> LossOutput:
        """Forward + backward of one batch (gradients accumulate in ``.grad``)."""

    def after_optimizer_step(self) -> None:
        """Hook after ``optimizer.step()`` (e.g. clamp the temperature)."""

    def save(self, model: nn.Module, path: Path) -> None:
        """Write the pretrained encoder as a plain ``AutoModel`` folder with its tokenizer."""

    def summary(self) -> dict[str, Any]:
        """Extra figures for the result file."""


class RetroMAETask:
    """RetroMAE (:mod:`care.pretrain.retromae`) on ``.txt`` lines or JSONL ``text`` fields."""

    def __init__(self, config: PretrainConfig) -> None:
        from transformers import AutoTokenizer

        from care.pretrain.masking import RetroMAECollator

        self.config = config
        self.parser = TextParser(config.data.text_field)
        mc = config.model
        self.tokenizer = AutoTokenizer.from_pretrained(mc.name_or_path, trust_remote_code=mc.trust_remote_code)
        self.collator = RetroMAECollator(self.tokenizer, config.retromae, mc.max_seq_length)

    def build(self) -> tuple[nn.Module, None]:
        from care.pretrain.retromae import RetroMAEModel, load_masked_lm

        mlm = load_masked_lm(self.config.model.name_or_path, trust_remote_code=self.config.model.trust_remote_code)
        return RetroMAEModel(mlm, self.config.retromae), None

    def step(self, records: list[str], accelerator) -> LossOutput:
        batch = self.collator(records).to(accelerator.device)
        with accelerator.autocast():
            out = self.model(batch)
        accelerator.backward(out.loss)
        return out

    def after_optimizer_step(self) -> None:
        return None

    def save(self, model: nn.Module, path: Path) -> None:
        model.save_encoder(path, self.tokenizer)

    def summary(self) -> dict[str, Any]:
        r = self.config.retromae
        return {"decoding": "enhanced" if r.enhanced_decoding else "basic",
                "encoder_mask_ratio": r.encoder_mask_ratio, "decoder_mask_ratio": r.decoder_mask_ratio}


class ContrastiveTask:
    """In-batch InfoNCE (:mod:`care.pretrain.contrastive`) on JSONL pairs, GradCache for large batches."""

    def __init__(self, config: PretrainConfig) -> None:
        self.config = config
        self.parser = PairParser(config.data.pair_fields)
        self.loss: nn.Module | None = None

    def build(self) -> tuple[nn.Module, nn.Module]:
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

    def step(self, records: list[tuple[str, str]], accelerator) -> LossOutput:
        from care.train.engine.gradcache import EncodeJob, grad_cache_step

        device = accelerator.device
        jobs = [EncodeJob(name, "encoder", self._features([r[i] for r in records], device), len(records))
                for i, name in enumerate(("a", "b"))]

        def encode(_tower: str, features: dict[str, Any]) -> torch.Tensor:
            with accelerator.autocast():
                return self.model(features)

        def loss_fn(embeddings) -> torch.Tensor:
            return self.loss(embeddings["a"].float(), embeddings["b"].float())

        chunk = self.config.contrastive.grad_cache_chunk_size
        if chunk and len(records) > chunk:
            loss = grad_cache_step(jobs, encode, loss_fn, chunk_size=chunk, backward=accelerator.backward,
                                   device=device, no_sync=lambda: accelerator.no_sync(self.model))
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

    def save(self, model: nn.Module, path: Path) -> None:
        transformer = model.encoder[0]
        transformer.auto_model.save_pretrained(path)
        transformer.tokenizer.save_pretrained(path)

    def summary(self) -> dict[str, Any]:
        return {"temperature": float(self.loss.temperature.detach()), "learn_temperature": self.loss.learnable,
                "pooling": self.config.model.pooling}


def make_task(config: PretrainConfig) -> PretrainTask:
    """The task of ``config.method``."""
    return {"retromae": RetroMAETask, "contrastive": ContrastiveTask}[config.method](config)
