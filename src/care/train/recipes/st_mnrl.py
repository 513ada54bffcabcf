"""The sentence-transformers trainer baseline (``care train baseline st-mnrl``): one model fine-tuned on both sides.

The standard tool on the same data, as a reference every CARE row is compared with: a sentence-transformers
model (``Transformer -> Pooling -> Normalize``) trained with sentence-transformers' own
``SentenceTransformerTrainer`` on the training file's ``(query, first positive)`` pairs with
``MultipleNegativesRankingLoss`` (in-batch negatives; ``scale`` 50 = τ 0.02, the paper's Stage II temperature)
and no-duplicates batches (no text twice in a batch, so no copy of a positive acts as its negative).

The defaults (:class:`StMnrlConfig`) are the settings of the ``peer`` row of
``benchmarks/bench_real_weights.py`` (issue 15): 1 epoch, batch 32, lr 2e-5, 10 % warm-up, max length 192,
mean pooling. An e5 checkpoint (``e5`` tower spec, or any folder :func:`care.train.recipes.presets.is_e5_checkpoint`
recognises) trains with e5's ``query: `` / ``passage: `` prefixes unless the config names its own; the prefixes
are stored in the saved folder (:mod:`care.encoders.stored_prompts`), so every loader encodes it as trained.

The trainer checkpoints every ``checkpoint_steps`` optimiser steps (model, optimiser, scheduler, RNG states;
the last one kept) and an interrupted run resumes from its last checkpoint. Output folder::

    <output>/model/              the trained sentence-transformers folder (what to evaluate)
    <output>/train_result.json   written last: steps, final loss, training wall time (care.train.engine.trainer.TrainResult)
    <output>/st_mnrl.json        the settings; a rerun with other settings is refused
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from care.config import Config, ConfigError
from care.train.engine.trainer import RESULT_FILE, TrainResult, read_result

logger = logging.getLogger(__name__)

#: The training stage named in ``train_result.json``.
STAGE = "st_mnrl"
MODEL_FOLDER = "model"
CHECKPOINT_FOLDER = "checkpoints"
SETTINGS_FILE = "st_mnrl.json"
#: Poolings the model may use (sentence-transformers' Pooling modes CARE builds: care.models.query).
POOLINGS: tuple[str, ...] = ("mean", "cls", "lasttoken")


@dataclass
class StMnrlConfig(Config):
    """Settings of the sentence-transformers baseline (``configs/baselines/st_mnrl/train.yaml``).

    Attributes:
        epochs / batch_size / lr: the trainer's epochs, per-device batch and learning rate.
        warmup_ratio: linear warm-up over this share of the steps (the trainer's ``warmup_steps`` as a ratio).
        scale: ``MultipleNegativesRankingLoss``'s similarity scale (1 / τ; 50 = τ 0.02).
        max_length: token budget of queries and documents.
        pooling: ``mean`` (e5), ``cls`` or ``lasttoken``.
        query_prompt / document_prompt: prefixes put before queries / documents in training and stored in the
            saved folder; ``None``: e5's ``query: `` / ``passage: `` for an e5 checkpoint, none otherwise;
            ``""``: no prefix.
        seed: seed of the model initialisation and the data order.
        checkpoint_steps: optimiser steps between checkpoints.
        logging_steps: optimiser steps between loss log lines.
    """

    epochs: int = 1
    batch_size: int = 32
    lr: float = 2e-5
    warmup_ratio: float = 0.1
    scale: float = 50.0
    max_length: int = 192
    pooling: str = "mean"
    query_prompt: str | None = None
    document_prompt: str | None = None
    seed: int = 42
    checkpoint_steps: int = 50
    logging_steps: int = 50

    def validate(self) -> None:
        for name in ("epochs", "batch_size", "max_length", "checkpoint_steps", "logging_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"config field '{name}': must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0 or self.scale <= 0:
            raise ConfigError(f"config field '{'lr' if self.lr <= 0 else 'scale'}': must be > 0")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"config field 'warmup_ratio': must be in [0, 1), got {self.warmup_ratio}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"config field 'pooling': must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")

    def prompts(self, model: str) -> tuple[str, str]:
        """The query and document prefixes ``model`` trains with (see the attributes)."""
        from care.models.e5_export import PASSAGE_PREFIX, QUERY_PREFIX
        from care.train.recipes.presets import is_e5_checkpoint

        e5 = is_e5_checkpoint(model)
        query = self.query_prompt if self.query_prompt is not None else (QUERY_PREFIX if e5 else "")
        document = self.document_prompt if self.document_prompt is not None else (PASSAGE_PREFIX if e5 else "")
        return query, document


def train_st_mnrl(model: str, train_file: str | Path, output_dir: str | Path,
                  config: StMnrlConfig | None = None) -> TrainResult:
    """Fine-tune ``model`` on both sides with sentence-transformers' trainer; skipped when already finished.

    Args:
        model: a model folder or hub id (an ``e5`` tower spec resolved by the caller:
            :func:`care.models.tower_spec.resolve_tower_spec`).
        train_file: training JSONL (``{query, pos, ...}``; the first positive of each row is trained on).
        output_dir: see the module docstring.
        config: the settings (default: :class:`StMnrlConfig`).
    Returns:
        The run's :class:`TrainResult` (``query_model`` and ``document_model``: the trained folder).
    Raises:
        CareError: the folder holds a run with other settings, or the training file is malformed (naming
            file and line).
    """
    from care.data.io import write_json
    from care.train.recipes.recipe import record_run_settings

    config = config or StMnrlConfig()
    out = Path(output_dir)
    done = read_result(out)
    if done is not None and done.completed:
        logger.info("st-mnrl: %s already finished, skipping", out)
        return done
    out.mkdir(parents=True, exist_ok=True)
    record_run_settings(out / SETTINGS_FILE, {"model": str(model), "train_file": str(Path(train_file).resolve()),
                                              "config": config.to_dict()},
                        "st-mnrl", "give each run its own output folder")
    trained = _train(model, train_file, out, config)
    result = TrainResult(STAGE, str(out), trained.global_step, trained.training_loss,
                         query_model=str(out / MODEL_FOLDER), document_model=str(out / MODEL_FOLDER),
                         train_seconds=round(trained.metrics["train_runtime"], 3),
                         # after a resume the trainer's runtime covers the last attempt only
                         extra={"resumed": trained.resumed})
    write_json(out / RESULT_FILE, asdict(result))
    shutil.rmtree(out / CHECKPOINT_FOLDER, ignore_errors=True)  # the model is saved; a checkpoint is ~3x its size
    return result


@dataclass
class _Trained:
    global_step: int
    training_loss: float | None
    metrics: dict
    resumed: bool


def _train(model: str, train_file: str | Path, out: Path, config: StMnrlConfig) -> _Trained:
    """One (resumable) run of sentence-transformers' trainer; saves ``out/model`` with its prefixes stored."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.training_args import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from care.data.training import RETRIEVAL, iter_training_file
    from care.encoders.stored_prompts import write_stored_prompts
    from care.models.query import build_query_encoder

    pairs = [(e.query, e.pos[0]) for e in iter_training_file(train_file) if e.kind == RETRIEVAL and e.pos]
    if not pairs:
        raise ConfigError(f"{train_file}: no retrieval rows with a positive to train st-mnrl on")
    dataset = Dataset.from_dict({"anchor": [q for q, _ in pairs], "positive": [d for _, d in pairs]})
    query_prompt, document_prompt = config.prompts(model)
    st_model = build_query_encoder(model, pooling=config.pooling, max_seq_length=config.max_length)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / CHECKPOINT_FOLDER), num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size, learning_rate=config.lr, warmup_steps=config.warmup_ratio,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        prompts={k: v for k, v in (("anchor", query_prompt), ("positive", document_prompt)) if v} or None,
        seed=config.seed, data_seed=config.seed, report_to="none", logging_steps=config.logging_steps,
        save_strategy="steps", save_steps=config.checkpoint_steps, save_total_limit=1)
    trainer = SentenceTransformerTrainer(model=st_model, args=args, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(st_model, scale=config.scale))
    resume = any((out / CHECKPOINT_FOLDER).glob("checkpoint-*"))
    if resume:
        logger.info("st-mnrl: resuming from the last checkpoint under %s", out / CHECKPOINT_FOLDER)
    output = trainer.train(resume_from_checkpoint=resume or None)
    folder = out / MODEL_FOLDER
    st_model.save(str(folder))
    if query_prompt or document_prompt:
        write_stored_prompts(folder, query_prompt or None, document_prompt or None)
    return _Trained(output.global_step, output.training_loss, dict(output.metrics), resume)
