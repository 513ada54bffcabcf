"""Pretraining configuration: one dataclass tree for RetroMAE and unsupervised contrastive pretraining.

A :class:`PretrainConfig` round-trips to YAML and JSON like :class:`care.train.engine.config.TrainConfig`
(same loader helpers: unknown keys rejected, ``--set key.sub=value`` overrides, errors naming the
field). ``method`` picks the objective:

- ``retromae``: masked auto-encoding (Xiao et al., 2022) — section ``retromae``;
- ``contrastive``: InfoNCE on text pairs with in-batch negatives — section ``contrastive``.

The section of the other method is ignored. ``checkpoint`` and ``runtime`` are the engine's own sections
(:class:`~care.train.engine.config.CheckpointConfig`, :class:`~care.train.engine.config.RuntimeConfig`): pretraining
runs through the engine's loop. Shipped examples: ``configs/pretrain/*.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from care.config import Config, ConfigError, Override, apply_overrides, read_config_file
from care.train.engine.config import CheckpointConfig, RuntimeConfig, _check

METHODS: tuple[str, ...] = ("retromae", "contrastive")
POOLING_MODES: tuple[str, ...] = ("cls", "mean")
#: RetroMAE's defaults (paper §3): moderate encoder masking, aggressive decoder masking.
DEFAULT_ENCODER_MASK_RATIO = 0.3
DEFAULT_DECODER_MASK_RATIO = 0.5


@dataclass
class PretrainModelConfig:
    """The encoder being pretrained.

    name_or_path: a Hugging Face folder or hub id of a BERT-style encoder (a plain ``BertModel``
    folder such as the tiny BERT of ``care model init-tiny`` works: the MLM head is then new).
    pooling: sentence embedding of the contrastive objective (``cls`` = the CARE query tower's).
    RetroMAE always uses the CLS hidden state.
    """

    name_or_path: str = ""
    max_seq_length: int = 512
    pooling: str = "cls"
    trust_remote_code: bool = False


@dataclass
class PretrainDataConfig:
    """Streamed input files (read line by line, never loaded whole).

    train_files: ``.txt`` (one text per line) or ``.jsonl`` files, read in order each epoch.
    text_field: the JSONL field holding the text (RetroMAE).
    pair_fields: the two JSONL fields of a contrastive pair, e.g. ``[title, content]`` or
        ``[query, pos]`` (a list value contributes its first item).
    shuffle_buffer: records held in a seeded shuffle buffer (0 = file order). Its content is saved in
        every checkpoint, so resume stays exact.
    """

    train_files: list[str] = field(default_factory=list)
    text_field: str = "text"
    pair_fields: list[str] = field(default_factory=lambda: ["title", "content"])
    shuffle_buffer: int = 0


@dataclass
class RetroMAEConfig:
    """RetroMAE objective.

    encoder_mask_ratio / decoder_mask_ratio: 0.3 / 0.5 in the paper's base setting.
    enhanced_decoding: the paper's enhanced decoder (two streams; row ``i`` attends to the sentence
        embedding plus its own random subset of the context, and every token is reconstructed).
        ``false``: the basic decoder (``[sentence embedding ; masked text]`` through one layer with
        full self-attention, loss on the masked tokens).
    encoder_loss_weight / decoder_loss_weight: ``L = w_e·L_mlm(encoder) + w_d·L_rec(decoder)``.
    mask_replace_prob / random_replace_prob: BERT's 80/10/10 rule for the encoder's masked tokens.
    whole_word_mask: transformers' whole-word masking (for word-piece tokenizers; with the
        character-level Chinese tokenizer every token is a character, so plain token masking is
        character masking).
    """

    encoder_mask_ratio: float = DEFAULT_ENCODER_MASK_RATIO
    decoder_mask_ratio: float = DEFAULT_DECODER_MASK_RATIO
    enhanced_decoding: bool = True
    encoder_loss_weight: float = 1.0
    decoder_loss_weight: float = 1.0
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    whole_word_mask: bool = False


@dataclass
class ContrastiveConfig:
    """In-batch InfoNCE on pairs.

    temperature: τ (initial value when learnable).
    learn_temperature: τ = exp(θ) with θ a trained scalar, clamped to [min_temperature, max_temperature].
    gather_across_devices: other ranks' second texts join the negatives (multi-GPU).
    grad_cache_chunk_size: encode the batch in chunks of this size with GradCache (large batches in
        little memory; gradients equal the full batch's).
    """

    temperature: float = 0.05
    learn_temperature: bool = False
    min_temperature: float = 0.01
    max_temperature: float = 1.0
    gather_across_devices: bool = True
    grad_cache_chunk_size: int | None = None


@dataclass
class PretrainOptimConfig:
    """AdamW + linear warmup/decay. ``max_steps`` (when set) overrides ``epochs``."""

    lr: float = 1e-4
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    warmup_ratio: float = 0.1
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 32
    max_grad_norm: float | None = 1.0


@dataclass
class PretrainConfig(Config):
    """One pretraining run; ``output_dir`` receives checkpoints, logs, metrics and ``model/``."""

    method: str = "retromae"
    output_dir: str = "runs/pretrain"
    seed: int = 42
    model: PretrainModelConfig = field(default_factory=PretrainModelConfig)
    data: PretrainDataConfig = field(default_factory=PretrainDataConfig)
    retromae: RetroMAEConfig = field(default_factory=RetroMAEConfig)
    contrastive: ContrastiveConfig = field(default_factory=ContrastiveConfig)
    optim: PretrainOptimConfig = field(default_factory=PretrainOptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad field."""
        m, d, r, c, o, k, rt = (self.model, self.data, self.retromae, self.contrastive, self.optim,
                                self.checkpoint, self.runtime)
        _check(self.method in METHODS, "method", f"must be one of {', '.join(METHODS)}, got {self.method!r}")
        _check(bool(self.output_dir), "output_dir", "must be a folder path")
        _check(bool(m.name_or_path), "model.name_or_path", "required: a BERT-style checkpoint folder or hub id")
        _check(m.max_seq_length > 1, "model.max_seq_length", "must be > 1")
        _check(m.pooling in POOLING_MODES, "model.pooling", f"must be one of {', '.join(POOLING_MODES)}")
        _check(bool(d.train_files), "data.train_files", "required: a list of .txt / .jsonl files")
        _check(bool(d.text_field), "data.text_field", "must name a JSONL field")
        _check(len(d.pair_fields) == 2 and all(d.pair_fields) and d.pair_fields[0] != d.pair_fields[1],
               "data.pair_fields", "must be two different JSONL field names, e.g. [title, content]")
        _check(d.shuffle_buffer >= 0, "data.shuffle_buffer", "must be >= 0")
        for name in ("encoder_mask_ratio", "decoder_mask_ratio"):
            _check(0 < getattr(r, name) < 1, f"retromae.{name}", "must be in (0, 1)")
        _check(r.encoder_loss_weight >= 0 and r.decoder_loss_weight >= 0, "retromae.encoder_loss_weight",
               "loss weights must be >= 0")
        _check(r.encoder_loss_weight + r.decoder_loss_weight > 0, "retromae.decoder_loss_weight",
               "the two loss weights cannot both be 0")
        _check(0 <= r.mask_replace_prob <= 1 and 0 <= r.random_replace_prob <= 1
               and r.mask_replace_prob + r.random_replace_prob <= 1, "retromae.mask_replace_prob",
               "mask_replace_prob and random_replace_prob must be in [0, 1] and sum to <= 1")
        _check(c.temperature > 0, "contrastive.temperature", f"must be > 0, got {c.temperature}")
        _check(0 < c.min_temperature <= c.temperature <= c.max_temperature, "contrastive.temperature",
               f"must lie in [min_temperature, max_temperature] = [{c.min_temperature}, {c.max_temperature}]")
        _check(c.grad_cache_chunk_size is None or c.grad_cache_chunk_size > 0, "contrastive.grad_cache_chunk_size",
               "must be > 0 or null")
        _check(o.lr > 0, "optim.lr", f"must be > 0, got {o.lr}")
        _check(o.weight_decay >= 0, "optim.weight_decay", "must be >= 0")
        _check(len(o.betas) == 2 and all(0 <= b < 1 for b in o.betas), "optim.betas", "must be two numbers in [0, 1)")
        _check(0 <= o.warmup_ratio < 1, "optim.warmup_ratio", "must be in [0, 1)")
        _check(o.epochs > 0, "optim.epochs", "must be > 0")
        _check(o.max_steps is None or o.max_steps > 0, "optim.max_steps", "must be > 0 or null")
        _check(o.batch_size > 0, "optim.batch_size", "must be > 0")
        _check(self.method != "contrastive" or o.batch_size > 1, "optim.batch_size",
               "contrastive pretraining needs >= 2 pairs per batch (in-batch negatives)")
        _check(o.max_grad_norm is None or o.max_grad_norm > 0, "optim.max_grad_norm", "must be > 0 or null")
        k.validate()
        rt.validate()
        _check(rt.deepspeed_config is None, "runtime.deepspeed_config",
               "pretraining runs on DDP (a side module such as a learnable temperature stays out of DeepSpeed's "
               "engine): remove it")


def load_pretrain_config(path: str | Path, overrides: Sequence[Override] = (),
                         method: str | None = None) -> PretrainConfig:
    """Read a YAML/JSON config, apply ``key.sub=value`` overrides (or typed ``(key, value)`` pairs), validate.

    Args:
        method: when given (the CLI's ``retromae`` / ``contrastive``), the file's ``method`` must
            agree or be absent.
    Raises:
        ConfigError: missing file, bad YAML, a bad field (named), or a method mismatch.
    """
    data = read_config_file(path)
    if method is not None:
        found = data.setdefault("method", method)
        if found != method:
            raise ConfigError(f"{path}: config field 'method' is {found!r} but the command is 'care pretrain {method}'")
    return PretrainConfig.from_dict(apply_overrides(data, overrides), source=str(path))
