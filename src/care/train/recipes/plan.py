"""A recipe run as one typed object: :class:`RecipePlan`, built once from typed settings, then executed.

``care run`` (:mod:`care.pipeline.train`), ``care train recipe`` (:mod:`care.train.cli`), ``care train sweep`` and its
variants (:mod:`care.train.recipes.sweep`) and the query-latency budget (:func:`care.train.recipes.budget_tower.
rich_stage1`) are functions from settings to a plan or from a plan to a plan;
:func:`care.train.recipes.recipe.run_recipe` only executes one. A plan holds the inputs (:class:`RecipePaths`),
the stage-config folder or preset, the ablation switches (:class:`RecipeConfig`), the safety net's
:class:`~care.train.recipes.validation.ValidationConfig`, the stages to run, and every stage setting as a typed
:class:`~care.train.stage_settings.StageSetting` — ``key=value`` text is parsed before a plan is built
(:func:`~care.train.stage_settings.parse_settings`, at the CLI and when a YAML file is read), never after.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError, read_config_file
from care.train.recipes.static_query import StaticTowerConfig
from care.train.recipes.validation import ValidationConfig
from care.train.stage_settings import StageSetting, last_value, parse_settings

#: The recipe's stages, in order.
RECIPE_STAGES: tuple[str, ...] = ("init_query", "init_document", "stage1", "stage1_rank", "stage2")
#: ``mine_negatives: {n_negatives: 0}``: no mining, whatever the config folder's default.
MINING_OFF = 0
#: Stage I training data: alignment rows (paper) or the retrieval fine-tuning file (ablation).
STAGE1_DATA: tuple[str, ...] = ("alignment", "finetune")
#: The stage-config field that seeds a run (a setting for every stage).
SEED_KEY = "seed"


@dataclass
class RecipeConfig(Config):
    """Ablation switches of the recipe (all off = the paper's full CARE recipe).

    Attributes:
        skip_query_init: no ``init_query``; Stage I starts from the (pretrained) query checkpoint.
        skip_document_init: no ``init_document``; Stage I's teacher and Stage II start from the base LLM.
        skip_stage1: no query alignment; Stage II starts from the initialised query encoder.
        skip_stage2: no joint fine-tuning; the Stage I model is the result.
        skip_stage1_rank: no ranking alignment after Stage I even where the config folder has one.
        stage1_data: ``"alignment"`` (``(q,q,q⁻)``/``(d,d,d⁻)`` rows) or ``"finetune"`` (the training file's
            ``(q, d⁺, d⁻)`` rows).
        pretrained_query_model: checkpoint ``init_query`` starts from instead of ``RecipePaths.query_model``
            — e.g. a RetroMAE or unsupervised-InfoNCE pretrained encoder ("pretraining on"); ``None``
            keeps the base model ("off").
        overrides: stage-config overrides that belong to the ablation, applied after the run's own
            (``["stage1:loss.lambda_mse=0"]`` = Stage I without MSE).
        mine_negatives: Stage II's hard negatives mined by the initialised document tower over
            ``RecipePaths.corpus_file`` with likely false negatives filtered
            (:class:`care.train.recipes.model_negatives.MiningConfig` as a dict); ``None`` = the config folder's default
            (its ``recipe.yaml``: the e5 preset mines one negative per query), or none;
            ``{"n_negatives": 0}`` = never mine (Stage II keeps the training file's negatives).
        static_tower: how a static query tower (``e5?layers=0``) is trained — its own learning rate, token
            weights (:class:`care.train.recipes.static_query.StaticTowerConfig`); ignored for any other query tower.

    One YAML file per ablation (``configs/ablations/*.yaml``) loads with :func:`load_recipe_config`.
    """

    skip_query_init: bool = False
    skip_document_init: bool = False
    skip_stage1: bool = False
    skip_stage2: bool = False
    skip_stage1_rank: bool = False
    stage1_data: str = "alignment"
    pretrained_query_model: str | None = None
    overrides: list[str] = field(default_factory=list)
    mine_negatives: dict[str, Any] | None = None
    static_tower: StaticTowerConfig = field(default_factory=StaticTowerConfig)

    def __post_init__(self) -> None:
        if isinstance(self.static_tower, dict):  # built from plain data (a YAML file, a recorded plan)
            self.static_tower = StaticTowerConfig.from_dict(self.static_tower, source="recipe field 'static_tower'")
        self.validate()

    def validate(self) -> None:
        if self.mining is not None:
            from care.config import build
            from care.train.recipes.model_negatives import MiningConfig

            build(MiningConfig, self.mining, source="recipe field 'mine_negatives'")
        for name in ("skip_query_init", "skip_document_init", "skip_stage1", "skip_stage2", "skip_stage1_rank"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"config field '{name}': expected true/false, got {getattr(self, name)!r}")
        if not isinstance(self.overrides, list):
            raise ConfigError(f"config field 'overrides': expected a list of KEY=VALUE strings, got {self.overrides!r}")
        parse_settings(self.overrides, source="config field 'overrides': item")
        if self.stage1_data not in STAGE1_DATA:
            raise ConfigError(f"config field 'stage1_data': must be one of {', '.join(STAGE1_DATA)}, "
                              f"got {self.stage1_data!r}")

    @property
    def mining(self) -> dict[str, Any] | None:
        """The mining settings, or None for no mining (unset, or ``n_negatives`` 0)."""
        if self.mine_negatives is None or self.mine_negatives.get("n_negatives") == MINING_OFF:
            return None
        return self.mine_negatives

    def skipped(self) -> set[str]:
        """Stages these switches remove."""
        flags = {"init_query": self.skip_query_init, "init_document": self.skip_document_init,
                 "stage1": self.skip_stage1, "stage1_rank": self.skip_stage1_rank or self.skip_stage1,
                 "stage2": self.skip_stage2}
        return {stage for stage, off in flags.items() if off}



def load_recipe_config(path: str | Path) -> RecipeConfig:
    """Read a :class:`RecipeConfig` from YAML/JSON (e.g. ``configs/ablations/no_stage1.yaml``)."""
    return RecipeConfig.from_dict(read_config_file(path, "recipe config"), source=str(path))


@dataclass
class RecipePaths:
    """Inputs of a recipe run."""

    query_model: str
    document_model: str
    train_file: str
    output_dir: str
    alignment_file: str | None = None
    corpus_file: str | None = None
    #: a validation task already carved from ``train_file`` (``care run``'s label step does): every stage is
    #: scored on it and nothing more is held out; ``None``: the recipe carves one itself (ValidationConfig)
    validation_task: str | None = None
    #: embedding cache of the validation scoring (``None``: ``<output>/validation/cache``)
    cache_dir: str | None = None
    #: the task instruction the validation queries are encoded with by models that take one (``care run``: its
    #: main task's); ``None``: none
    validation_instruction: str | None = None
    #: stages already trained elsewhere with this run's settings (stage -> its folder, e.g. a sweep's base run's
    #: ``init_document``): used as they are instead of being trained into ``output_dir`` (care.train.recipes.sweep)
    finished_stages: dict[str, str] | None = None


@dataclass(frozen=True)
class RecipePlan:
    """Everything one recipe run needs, typed; :func:`care.train.recipes.recipe.run_recipe` executes it.

    Attributes:
        paths: base models, training file, output folder and the optional data files.
        config_dir: folder of ``<stage>.yaml`` configs, or ``preset:NAME``; ``None``: the ``e5`` preset for an e5
            document model, else the stages' declared defaults.
        settings: stage settings applied after each stage's file and the recipe's wiring, in order (a stage's own
            setting after every-stage ones: :func:`care.train.stage_settings.for_stage`).
        stages: the subset of :data:`RECIPE_STAGES` to run.
        recipe: the ablation switches (their ``overrides``, YAML text, are parsed into :attr:`all_settings`).
        validation: the safety net's settings.
    """

    paths: RecipePaths
    config_dir: str | None = None
    settings: tuple[StageSetting, ...] = ()
    stages: tuple[str, ...] = RECIPE_STAGES
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", tuple(self.settings))
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "config_dir", None if self.config_dir is None else str(self.config_dir))
        bad = [s for s in self.settings if not isinstance(s, StageSetting)]
        if bad:
            raise ConfigError(f"RecipePlan.settings: expected StageSetting values (parse text with "
                              f"care.train.stage_settings.parse_settings), got {bad[0]!r}")
        unknown = [s for s in self.stages if s not in RECIPE_STAGES]
        if unknown:
            raise ConfigError(f"unknown recipe stage(s) {unknown}; choose from {', '.join(RECIPE_STAGES)}")

    @property
    def all_settings(self) -> tuple[StageSetting, ...]:
        """The run's settings, then the ablation's (``recipe.overrides``, parsed from its YAML)."""
        return (*self.settings, *parse_settings(self.recipe.overrides, source="recipe field 'overrides'"))

    @property
    def seed(self) -> int:
        """The run's seed (:func:`seed_of` its settings)."""
        return seed_of(self.all_settings)

    def with_settings(self, *added: StageSetting, first: bool = False) -> RecipePlan:
        """A copy with ``added`` after the plan's settings (``first``: before them, so the plan's own win)."""
        settings = (*added, *self.settings) if first else (*self.settings, *added)
        return replace(self, settings=settings)

    def with_paths(self, **changes: Any) -> RecipePlan:
        """A copy whose :class:`RecipePaths` has ``changes``."""
        return replace(self, paths=replace(self.paths, **changes))

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data (what a run records)."""
        from dataclasses import asdict

        return {"paths": asdict(self.paths), "config_dir": self.config_dir,
                "settings": [s.to_dict() for s in self.settings], "stages": list(self.stages),
                "recipe": self.recipe.to_dict(), "validation": self.validation.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecipePlan:
        return cls(RecipePaths(**data["paths"]), data.get("config_dir"),
                   tuple(StageSetting.from_dict(s) for s in data.get("settings", ())),
                   tuple(data.get("stages", RECIPE_STAGES)), RecipeConfig.from_dict(data.get("recipe", {})),
                   ValidationConfig.from_dict(data.get("validation", {})))


def seed_of(settings: Iterable[StageSetting]) -> int:
    """The seed ``settings`` give a run: the last every-stage ``seed`` setting, else 0."""
    return int(last_value(list(settings), SEED_KEY, 0))
