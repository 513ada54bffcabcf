"""The recipe as one typed object: :class:`RecipePlan`, built once from typed settings, then executed.

:func:`plan_recipe` turns the recipe's inputs — base towers and files (:class:`RecipePaths`), the ablation
switches (:class:`RecipeConfig`), a config folder or preset, typed stage settings
(:class:`care.train.overrides.StageSetting`) and the safety net's settings — into a plan: the stages that
run and each stage's validated :class:`care.train.engine.config.TrainConfig`, wired (which tower each stage
starts from, which file it trains on, where it writes). :func:`care.train.recipes.recipe.run_recipe` only
executes a plan. Everything that changes a recipe is a function from settings to a plan, or from a plan to a
plan: ``care run`` (:func:`care.pipeline.train.care_plan`), ``care train recipe``, a sweep's variants
(:func:`care.train.recipes.sweep.variant_plan`), the validation split (:meth:`RecipePlan.with_paths`) and the
query-latency budget (:func:`care.train.recipes.budget_tower.richer_stage1_settings`). A plan round-trips to
JSON (:meth:`RecipePlan.to_dict` / :meth:`RecipePlan.from_dict`); a run writes it beside its stages
(``plan.json``).

Settings apply to a stage in this order: its ``<stage>.yaml`` (or the stage's declared defaults), the recipe's
wiring, then the settings — every stage's first, then the stage's own — so a user's ``stage1:data.train_file``
still wins over the wiring.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError, apply_values, read_config_file
from care.errors import CareError
from care.train.engine.config import TrainConfig
from care.train.overrides import StageSetting, apply_settings, parse_settings, sets_key
from care.train.recipes.validation import ValidationConfig

logger = logging.getLogger(__name__)

RECIPE_STAGES: tuple[str, ...] = ("init_query", "init_document", "stage1", "stage1_rank", "stage2")
#: Recipe stages that run only when the config folder ships their ``<stage>.yaml`` (the paper's recipe
#: has no such stage; a preset opts in).
OPT_IN_STAGES: tuple[str, ...] = ("stage1_rank",)
#: Recipe stages trained as another training stage (:data:`care.train.engine.stage_catalog.STAGES`).
TRAINING_STAGE: dict[str, str] = {"stage1_rank": "bank_distill"}
#: Recipe stages that may train as one of several training stages: the stage's config file (its ``stage:``
#: field) or a ``<stage>:stage=NAME`` setting picks one; otherwise :data:`TRAINING_STAGE` or the stage's name.
STAGE_CHOICES: dict[str, tuple[str, ...]] = {"stage2": ("stage2", "stage2_distill", "stage1_sft")}
ALIGNMENT_FILE = "alignment.jsonl"
#: The ranking part's queries: the query-side rows of Stage I's alignment data.
RANK_QUERIES_FILE = "rank_queries.jsonl"
#: Stage II's training file with negatives mined by the initialised document tower (RecipeConfig.mine_negatives).
MINED_FILE = "stage2_train.jsonl"
RECIPE_FILE = "recipe.json"
#: The plan a run executed, beside its stages.
PLAN_FILE = "plan.json"
#: ``mine_negatives: {n_negatives: 0}``: no mining, whatever the config folder's default.
MINING_OFF = 0
#: Stage I training data: alignment rows (paper) or the retrieval fine-tuning file (ablation).
STAGE1_DATA: tuple[str, ...] = ("alignment", "finetune")
#: The run's seed (what the validation split is carved with) without an every-stage ``seed`` setting.
DEFAULT_RUN_SEED = 0
#: The key of a stage setting that picks the training stage a recipe stage runs as.
STAGE_KEY = "stage"


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
        overrides: stage settings that belong to the ablation, in the user's ``[STAGE:]KEY=VALUE`` syntax
            (``["stage1:loss.lambda_mse=0"]`` = Stage I without MSE), applied after the run's own; read once
            (:meth:`settings`) when a plan is built.
        mine_negatives: Stage II's hard negatives mined by the initialised document tower over
            ``RecipePaths.corpus_file`` with likely false negatives filtered
            (:class:`care.train.recipes.model_negatives.MiningConfig` as a dict); ``None`` = the config folder's
            default (its ``recipe.yaml``: the e5 preset mines one negative per query), or none;
            ``{"n_negatives": 0}`` = never mine (Stage II keeps the training file's negatives).

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

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.mining is not None:
            from care.config import build
            from care.train.recipes.model_negatives import MiningConfig

            build(MiningConfig, self.mining, source="recipe field 'mine_negatives'")
        for name in ("skip_query_init", "skip_document_init", "skip_stage1", "skip_stage2", "skip_stage1_rank"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"config field '{name}': expected true/false, got {getattr(self, name)!r}")
        if not isinstance(self.overrides, list) or not all(isinstance(o, str) and "=" in o for o in self.overrides):
            raise ConfigError(f"config field 'overrides': expected a list of KEY=VALUE strings, got {self.overrides!r}")
        if self.stage1_data not in STAGE1_DATA:
            raise ConfigError(f"config field 'stage1_data': must be one of {', '.join(STAGE1_DATA)}, "
                              f"got {self.stage1_data!r}")

    def settings(self) -> list[StageSetting]:
        """The ablation's ``overrides`` as typed settings (read from the user's syntax here, at the YAML edge)."""
        return parse_settings(self.overrides)

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


@dataclass
class RecipePlan:
    """A recipe run, planned: what :func:`care.train.recipes.recipe.run_recipe` executes.

    Attributes:
        paths: the base towers, files and output folder.
        recipe: the ablation switches, with the config folder's defaults (``recipe.yaml``) filled in.
        config_dir: the resolved config folder (a preset's folder), or ``None`` for the declared defaults.
        settings: the run's own stage settings (recorded in ``recipe.json``), in order.
        ablation_settings: the switches' ``overrides`` as typed settings, applied after ``settings``.
        validation: the safety net's settings.
        stages: the recipe stages that run, in recipe order.
        configs: each running stage's validated config, wired.
        seed: the run's seed (the last every-stage ``seed`` setting, else :data:`DEFAULT_RUN_SEED`): the
            validation split is carved with it.
    """

    paths: RecipePaths
    recipe: RecipeConfig
    config_dir: str | None
    settings: list[StageSetting]
    ablation_settings: list[StageSetting]
    validation: ValidationConfig
    stages: list[str]
    configs: dict[str, TrainConfig]
    seed: int = DEFAULT_RUN_SEED

    @property
    def all_settings(self) -> list[StageSetting]:
        """Every setting the stages get, in the order they apply."""
        return [*self.settings, *self.ablation_settings]

    @property
    def output_dir(self) -> Path:
        return Path(self.paths.output_dir)

    @property
    def query_start(self) -> str:
        """The query tower the recipe starts from (the pretrained checkpoint of the ablation, or the base)."""
        return self.recipe.pretrained_query_model or self.paths.query_model

    def stage_folder(self, stage: str) -> Path:
        """Where ``stage`` is (its own folder, or one it reuses)."""
        return Path((self.paths.finished_stages or {}).get(stage, self.output_dir / stage))

    def with_paths(self, **changes: Any) -> RecipePlan:
        """This plan with :class:`RecipePaths` fields changed (e.g. the training file minus the validation split),
        every stage rewired."""
        paths = replace(self.paths, **changes)
        return replace(self, paths=paths, configs=_wire(paths, self.recipe, self.config_dir, self.all_settings,
                                                        self.stages))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``plan.json``); :meth:`from_dict` reads it back."""
        return {"paths": asdict(self.paths), "recipe": self.recipe.to_dict(), "config_dir": self.config_dir,
                "settings": [s.to_dict() for s in self.settings],
                "ablation_settings": [s.to_dict() for s in self.ablation_settings],
                "validation": self.validation.to_dict(), "stages": list(self.stages),
                "configs": {stage: config.to_dict() for stage, config in self.configs.items()}, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecipePlan:
        """The plan :meth:`to_dict` wrote (each stage config validated again)."""
        return cls(paths=RecipePaths(**data["paths"]), recipe=RecipeConfig.from_dict(data["recipe"]),
                   config_dir=data["config_dir"], settings=[StageSetting.from_dict(s) for s in data["settings"]],
                   ablation_settings=[StageSetting.from_dict(s) for s in data["ablation_settings"]],
                   validation=ValidationConfig.from_dict(data["validation"]), stages=list(data["stages"]),
                   configs={stage: TrainConfig.from_dict(config) for stage, config in data["configs"].items()},
                   seed=int(data["seed"]))


def run_seed(settings: Sequence[StageSetting]) -> int:
    """The run's seed: the last every-stage ``seed`` setting, else :data:`DEFAULT_RUN_SEED`."""
    seeds = [s.value for s in settings if s.stage is None and s.key == "seed"]
    return int(seeds[-1]) if seeds else DEFAULT_RUN_SEED


def plan_recipe(paths: RecipePaths, *, config_dir: str | Path | None = None, settings: Sequence[StageSetting] = (),
                stages: Sequence[str] = RECIPE_STAGES, recipe: RecipeConfig | None = None,
                validation: ValidationConfig | None = None) -> RecipePlan:
    """The plan of a recipe run (reads the config folder; trains and writes nothing).

    Args:
        paths: base models, training file, output folder, optional Stage I alignment file.
        config_dir: folder with ``init_query.yaml``, ``init_document.yaml``, ``stage1.yaml``, ``stage2.yaml`` and
            optionally ``stage1_rank.yaml`` (:data:`OPT_IN_STAGES`) (e.g. ``configs/care_tiny``), or
            ``preset:NAME`` for a shipped preset (:mod:`care.train.recipes.presets`); model paths, data files and
            output folders in them are replaced by the recipe's wiring. ``None``: the ``e5`` preset for an e5
            document model, else the stages' declared defaults.
        settings: typed stage settings (every stage, or one), applied after each stage's file and the wiring.
        stages: subset of :data:`RECIPE_STAGES` to run (in recipe order).
        recipe: ablation switches (:class:`RecipeConfig`); they remove stages and rewire the rest.
        validation: the safety net's settings (``None``: on, with the defaults).
    Raises:
        ConfigError: an unknown stage, or a stage config that does not validate (naming the stage's file and field).
    """
    from care.train.recipes.presets import resolve_config_dir

    folder = resolve_config_dir(config_dir, paths.document_model)
    recipe = _with_folder_defaults(recipe or RecipeConfig(), folder, paths)
    unknown = [s for s in stages if s not in RECIPE_STAGES]
    if unknown:
        raise ConfigError(f"unknown recipe stage(s) {unknown}; choose from {', '.join(RECIPE_STAGES)}")
    running = [s for s in RECIPE_STAGES if s in stages and s not in recipe.skipped()
               and (s not in OPT_IN_STAGES or (folder is not None and (folder / f"{s}.yaml").is_file()))]
    own, ablation = list(settings), recipe.settings()
    folder_text = str(folder) if folder is not None else None
    return RecipePlan(paths, recipe, folder_text, own, ablation, validation or ValidationConfig(), running,
                      _wire(paths, recipe, folder_text, [*own, *ablation], running), seed=run_seed([*own, *ablation]))


def _wire(paths: RecipePaths, recipe: RecipeConfig, config_dir: str | None, settings: Sequence[StageSetting],
          stages: Sequence[str]) -> dict[str, TrainConfig]:
    """Each stage's config: what it starts from and trains on (the recipe's wiring), then ``settings``."""
    out = Path(paths.output_dir)
    dirs = {s: out / s for s in RECIPE_STAGES}
    dirs.update(_finished_elsewhere(paths.finished_stages or {}))
    query_start = recipe.pretrained_query_model or paths.query_model
    query_after_init = str(dirs["init_query"] / "query") if "init_query" in stages else query_start
    doc_after_init = str(dirs["init_document"] / "document") if "init_document" in stages else paths.document_model
    query_after_stage1 = str(dirs["stage1"] / "query") if "stage1" in stages else query_after_init
    query_after_rank = str(dirs["stage1_rank"] / "query") if "stage1_rank" in stages else query_after_stage1
    stage1_file = paths.train_file if recipe.stage1_data == "finetune" else None
    wiring = {
        "init_query": (query_start, None, paths.train_file),
        "init_document": (query_start, paths.document_model, paths.train_file),
        "stage1": (query_after_init, doc_after_init, stage1_file),
        "stage1_rank": (query_after_stage1, doc_after_init, stage1_file),
        "stage2": (query_after_rank, doc_after_init, paths.train_file),
    }
    configs: dict[str, TrainConfig] = {}
    for stage in stages:
        query_model, document_model, train_file = wiring[stage]
        extra: dict[str, Any] = {}
        if stage == "stage2" and recipe.mining is not None:
            # Stage II trains on what was mined, whatever the stage config's n_negatives (the e5 preset's is 0:
            # in-batch negatives only); an explicit ``stage2:data.n_negatives`` setting still wins
            train_file, extra["data.n_negatives"] = str(out / MINED_FILE), mining_config(recipe).n_negatives
        if stage == "stage1" and train_file is None:  # built from the training file when none is given
            train_file = paths.alignment_file or str(out / ALIGNMENT_FILE)
        if stage == "stage1_rank":
            extra["data.bank_file"] = paths.train_file  # ranked: the training file's documents
            # else Stage I trains on the train file (its queries are ranked), or the user named the ranked queries
            if train_file is None and not sets_key(settings, stage, "data.train_file"):
                train_file = str(out / RANK_QUERIES_FILE)
        values: dict[str, Any] = {STAGE_KEY: training_stage(stage, config_dir, settings), "output_dir": str(dirs[stage]),
                                  "model.query_model": query_model, "model.document_model": document_model,
                                  "data.train_file": train_file, **extra}
        if stage in ("stage1", "stage1_rank"):
            values["model.teacher.kind"] = "document"
        configs[stage] = stage_config(stage, config_dir, settings, values)
    return configs


def mining_config(recipe: RecipeConfig, **prompts: str | None):
    """Stage II's :class:`care.train.recipes.model_negatives.MiningConfig` (``recipe.mining`` over the prompts)."""
    from care.train.recipes.model_negatives import MiningConfig

    return MiningConfig(**{**prompts, **(recipe.mining or {})})


def stage_config(stage: str, config_dir: str | Path | None, settings: Sequence[StageSetting],
                 wiring: dict[str, Any]) -> TrainConfig:
    """The stage's YAML from ``config_dir`` (``<stage>.yaml``) or the built-in defaults, then the recipe's wiring
    (``wiring``: dotted key -> value), then ``settings`` (every stage's, then ``stage``'s); validated."""
    path = Path(config_dir) / f"{stage}.yaml" if config_dir is not None else None
    source = str(path) if path is not None and path.is_file() else None
    # the stage's file, or its declared defaults (care.train.engine.stage_catalog)
    data = read_config_file(path) if source else TrainConfig.for_stage(stage).to_dict()
    return TrainConfig.from_dict(apply_settings(apply_values(data, wiring), settings, stage), source=source)


def training_stage(stage: str, config_dir: str | Path | None, settings: Sequence[StageSetting]) -> str:
    """The training stage recipe stage ``stage`` runs as: the last ``<stage>:stage=NAME`` setting, else its
    config file's ``stage:`` field when that is one of the stage's :data:`STAGE_CHOICES`, else
    :data:`TRAINING_STAGE` or the stage's own name (``stage1_rank.yaml`` says ``bank_distill``; a file copied
    from another stage does not change what the recipe trains).

    Raises:
        ConfigError: a setting names a training stage this recipe stage cannot run as.
    """
    default = TRAINING_STAGE.get(stage, stage)
    choices = STAGE_CHOICES.get(stage, (default,))
    named = [s.value for s in settings if s.stage == stage and s.key == STAGE_KEY]
    if named:
        if named[-1] not in choices:
            raise ConfigError(f"override '{stage}:stage={named[-1]}': the recipe's {stage} trains as one of "
                              f"{', '.join(choices)}")
        return str(named[-1])
    path = Path(config_dir) / f"{stage}.yaml" if config_dir is not None else None
    in_file = read_config_file(path).get(STAGE_KEY) if path is not None and path.is_file() else None
    return in_file if in_file in choices else default


def _with_folder_defaults(recipe: RecipeConfig, config_dir: str | Path | None, paths: RecipePaths) -> RecipeConfig:
    """``recipe`` with the config folder's ``recipe.yaml`` defaults (:func:`care.train.recipes.presets.folder_recipe_defaults`)
    for the fields it leaves unset. The folder's mining needs a corpus: without one the recipe warns and
    leaves Stage II's negatives as they are (only mining asked for by the run itself is an error)."""
    from care.train.recipes.presets import folder_recipe_defaults

    mining = folder_recipe_defaults(config_dir).get("mine_negatives")
    if recipe.mine_negatives is not None or mining is None:
        return recipe
    if not (paths.corpus_file and Path(paths.corpus_file).is_file()):
        logger.warning("recipe: %s mines Stage II's hard negatives (%s) but no corpus was given: Stage II trains "
                       "without them; pass --corpus (corpus.jsonl) to mine, or --mine-negatives 0 to say so",
                       Path(str(config_dir)) / "recipe.yaml", mining)
        return recipe
    logger.info("recipe: Stage II's hard negatives are mined as %s sets: %s", Path(str(config_dir)) / "recipe.yaml", mining)
    return replace(recipe, mine_negatives=dict(mining))


def _finished_elsewhere(stages: dict[str, str]) -> dict[str, Path]:
    """``RecipePaths.finished_stages`` as stage folders, each checked to be a finished recipe stage."""
    from care.train.engine.trainer import read_result

    unknown = sorted(set(stages) - set(RECIPE_STAGES))
    if unknown:
        raise ConfigError(f"finished_stages: unknown recipe stage(s) {unknown}; choose from {', '.join(RECIPE_STAGES)}")
    for stage, folder in stages.items():
        done = read_result(folder)
        if done is None or not done.completed:
            raise CareError(f"{folder}: not a finished {stage} (no completed train_result.json); finish that run first")
    return {stage: Path(folder) for stage, folder in stages.items()}
