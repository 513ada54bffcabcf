"""CARE's whole training recipe in order: init (query, document) → Stage I → Stage II.

Each stage writes to ``<output>/<stage>/`` and marks itself finished with ``train_result.json``; a
rerun skips finished stages and resumes an interrupted one from its last checkpoint, so the recipe
never repeats finished work. Wiring between stages:

- ``init_query``:    query model → ``init_query/query``           (symmetric InfoNCE on the train file)
- ``init_document``: document model → ``init_document/document``  (LoRA + MRL InfoNCE on the train file)
- ``stage1``:        ``init_query/query`` learns against the frozen ``init_document/document``
                     on alignment data (built from the train file when none is given)
- ``stage1_rank``:   (opt-in: runs when the config folder ships ``stage1_rank.yaml``, as the ``e5``
                     preset does) ``stage1/query`` learns the frozen ``init_document/document``'s
                     ranking of every document of the train file (``bank_distill``), for every
                     query-side text of Stage I's alignment data (``rank_queries.jsonl``: the training
                     queries plus any corpus sentences the alignment file has); for the train file's
                     queries when Stage I trains on the train file
- ``stage2``:        ``stage1_rank/query`` (else ``stage1/query``) + ``init_document/document``
                     trained jointly → ``stage2/model``; as ``stage2_distill`` when its config file (or a
                     ``stage2:stage=stage2_distill`` override) says so: the frozen ``init_document/document``
                     (symmetric large) is then also the teacher of an in-batch score-distillation term;
                     as ``stage1_sft`` (``stage2:stage=stage1_sft``): the query tower alone, against the
                     frozen ``init_document/document``'s cached vectors — CARE keeps that document tower,
                     so a corpus index already built with it stays valid

Ablations (:class:`RecipeConfig`, the paper's ablation table): skip any of the four stages (the next
stage then starts from what the skipped one would have started from), run Stage I on the fine-tuning
file instead of alignment data, or start ``init_query`` from another pretrained query checkpoint
(RetroMAE / unsupervised-pretrained on or off). "Stage I without MSE" / "without the contrastive
term" are ``stage1:loss.lambda_mse=0`` / ``stage1:loss.lambda_contrastive=0`` overrides. The
settings are recorded in ``<output>/recipe.json``; rerunning into the same folder with different
settings is an error (finished stages of one ablation must not be reused by another).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError, apply_overrides, read_config_file
from care.errors import CareError
from care.train.engine.config import TrainConfig
from care.train.engine.trainer import TrainResult, read_result, train
from care.train.overrides import override_key, override_stage, sets_key
from care.train.recipes.validation import (
    SCORES_FILE,
    StageValidator,
    ValidationConfig,
    carve_validation,
    without_held_out,
)

logger = logging.getLogger(__name__)

RECIPE_STAGES: tuple[str, ...] = ("init_query", "init_document", "stage1", "stage1_rank", "stage2")
#: Recipe stages that run only when the config folder ships their ``<stage>.yaml`` (the paper's recipe
#: has no such stage; a preset opts in).
OPT_IN_STAGES: tuple[str, ...] = ("stage1_rank",)
#: Recipe stages trained as another training stage (:data:`care.train.engine.stage_catalog.STAGES`).
TRAINING_STAGE: dict[str, str] = {"stage1_rank": "bank_distill"}
#: Recipe stages that may train as one of several training stages: the stage's config file (its ``stage:``
#: field) or a ``<stage>:stage=NAME`` override picks one; otherwise :data:`TRAINING_STAGE` or the stage's name.
STAGE_CHOICES: dict[str, tuple[str, ...]] = {"stage2": ("stage2", "stage2_distill", "stage1_sft")}
ALIGNMENT_FILE = "alignment.jsonl"
#: The ranking part's queries: the query-side rows of Stage I's alignment data.
RANK_QUERIES_FILE = "rank_queries.jsonl"
#: Stage II's training file with negatives mined by the initialised document tower (RecipeConfig.mine_negatives).
MINED_FILE = "stage2_train.jsonl"
RECIPE_FILE = "recipe.json"
#: ``mine_negatives: {n_negatives: 0}``: no mining, whatever the config folder's default.
MINING_OFF = 0
#: Stage I training data: alignment rows (paper) or the retrieval fine-tuning file (ablation).
STAGE1_DATA: tuple[str, ...] = ("alignment", "finetune")


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


def _stage_config(stage: str, config_dir: str | Path | None, overrides: Sequence[str],
                  wiring: dict[str, object]) -> TrainConfig:
    """The stage's YAML from ``config_dir`` (``<stage>.yaml``) or the built-in defaults, then the
    recipe's wiring (``wiring``: dotted key -> value), then the overrides; validated.

    Overrides apply to every stage; prefix one with ``<stage>:`` to target a single stage
    (``stage2:optim.lr=5e-5``).
    """
    mine = [o.split(":", 1)[1] for o in overrides if override_stage(o) == stage]
    common = [o for o in overrides if override_stage(o) is None]
    path = Path(config_dir) / f"{stage}.yaml" if config_dir is not None else None
    source = str(path) if path is not None and path.is_file() else None
    # the stage's file, or its declared defaults (care.train.engine.stage_catalog)
    data = read_config_file(path) if source else TrainConfig.for_stage(stage).to_dict()
    data = apply_overrides(data, [f"{k}={_yaml_value(v)}" for k, v in wiring.items()])
    return TrainConfig.from_dict(apply_overrides(data, [*common, *mine]), source=source)


def _yaml_value(value: object) -> str:
    import json

    if value is None:
        return "null"
    if isinstance(value, (bool, int, float)):
        return json.dumps(value)  # a number or true/false, not a string
    return json.dumps(str(value), ensure_ascii=False)  # paths and text, quoted


def record_run_settings(path: Path, settings: dict[str, Any], what: str, fix: str) -> None:
    """Write ``settings`` to ``path`` on the first run; on a rerun refuse settings that changed.

    A resumed run skips finished steps, so finishing a run with other settings would silently mix
    two experiments; this names the changed fields (old -> new) and says ``fix``. A field the first
    run did not record (a file written by an older version), at any depth, is not compared.
    """
    from care.data.io import write_json

    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in settings if k in before and not _same_recorded(before[k], settings[k]))
        if changed:
            raise CareError(f"{path.parent} holds a {what} run with other settings ({', '.join(changed)}: "
                            f"{ {k: before.get(k) for k in changed} } -> { {k: settings[k] for k in changed} }); {fix}")
        return
    write_json(path, settings)


def _same_recorded(before: Any, now: Any) -> bool:
    """``now`` equals what was recorded, ignoring dict keys the record does not have (fields added since)."""
    if isinstance(before, dict) and isinstance(now, dict):
        return all(k in now and _same_recorded(v, now[k]) for k, v in before.items())
    return before == json.loads(json.dumps(now, default=str))


#: Override keys that change how a run reports or where it caches, not what it trains: a rerun may change
#: them freely. (The teacher cache is keyed by the frozen tower's fingerprint and the texts, so a folder
#: shared by several runs — e.g. query towers of several depths against one document tower — hands each
#: run only vectors of its own teacher.)
REPORTING_KEYS: tuple[str, ...] = ("runtime.progress_bar", "runtime.log_with", "runtime.log_every_steps",
                                   "model.teacher.cache_dir")


def result_overrides(overrides: Sequence[str]) -> list[str]:
    """``overrides`` without the reporting-only ones (:data:`REPORTING_KEYS`), as recorded for a run."""
    def key(override: str) -> str:
        name = override.split("=", 1)[0]
        return name.split(":", 1)[1] if ":" in name else name

    return [o for o in overrides if key(o) not in REPORTING_KEYS]


def _record_settings(out: Path, paths: RecipePaths, recipe: RecipeConfig, overrides: Sequence[str]) -> None:
    """Record the effective recipe in ``out/recipe.json`` (refusing a rerun with other settings). Mining
    is recorded as what happens: ``null`` for none, whether unset or ``{n_negatives: 0}``, so a folder
    trained before a config folder mined by default reruns with ``--mine-negatives 0``."""
    settings = {"recipe": {**recipe.to_dict(), "mine_negatives": recipe.mining},
                "query_model": recipe.pretrained_query_model or paths.query_model,
                "document_model": paths.document_model,
                "overrides": result_overrides(overrides)}
    fix = "give each ablation its own --output folder"
    if recipe.mining is not None:
        fix += " (a folder trained without mining: rerun it with --mine-negatives 0 / mine_negatives: {n_negatives: 0})"
    record_run_settings(out / RECIPE_FILE, settings, "recipe", fix)


def _same_model(recorded: str | None, wired: str) -> bool:
    """The same string, or two spellings of one existing folder."""
    if recorded == wired:
        return True
    return recorded is not None and Path(recorded).exists() and Path(recorded).resolve() == Path(wired).resolve()


def training_stage(stage: str, config_dir: str | Path | None, overrides: Sequence[str]) -> str:
    """The training stage recipe stage ``stage`` runs as: the last ``<stage>:stage=NAME`` override, else its
    config file's ``stage:`` field when that is one of the stage's :data:`STAGE_CHOICES`, else
    :data:`TRAINING_STAGE` or the stage's own name (``stage1_rank.yaml`` says ``bank_distill``; a file copied
    from another stage does not change what the recipe trains).

    Raises:
        ConfigError: an override names a training stage this recipe stage cannot run as.
    """
    import yaml

    default = TRAINING_STAGE.get(stage, stage)
    choices = STAGE_CHOICES.get(stage, (default,))
    named = [yaml.safe_load(o.split("=", 1)[1]) for o in overrides
             if override_stage(o) == stage and override_key(o) == "stage"]
    if named:
        if named[-1] not in choices:
            raise ConfigError(f"override '{stage}:stage={named[-1]}': the recipe's {stage} trains as one of "
                              f"{', '.join(choices)}")
        return str(named[-1])
    path = Path(config_dir) / f"{stage}.yaml" if config_dir is not None else None
    in_file = read_config_file(path).get("stage") if path is not None and path.is_file() else None
    return in_file if in_file in choices else default


def _check_finished_inputs(folder: Path, stage: str, query_model: str | None, document_model: str | None,
                           trained_as: str | None = None) -> None:
    """A finished stage is reused only if it was trained from the towers the recipe feeds it now, and as the
    training stage the recipe runs it as now (``trained_as``): a stage added before it (e.g. a preset gaining
    ``stage1_rank``) or a preset that changes Stage II's objective must not leave it trained the old way.

    Raises:
        CareError: naming the stage, what it was trained from and what it would get now.
    """
    from care.train.engine.trainer import CONFIG_FILE

    saved = folder / CONFIG_FILE
    if not saved.is_file():
        return  # finished by a version that did not save its config: nothing to compare
    config = read_config_file(saved, "stage config")
    model = config.get("model", {})
    wired = {"query_model": query_model, "document_model": document_model}
    changed = [k for k, v in wired.items() if v is not None and not _same_model(model.get(k), v)]
    before = {k: model.get(k) for k in changed}
    if trained_as is not None and config.get("stage", trained_as) != trained_as:
        changed.append("stage")
        before["stage"], wired["stage"] = config.get("stage"), trained_as
    if changed:
        raise CareError(
            f"{folder} is a finished {stage} trained with "
            + ", ".join(f"{k}={before[k]}" for k in changed)
            + "; the recipe now runs it with " + ", ".join(f"{k}={wired[k]}" for k in changed)
            + f" (its stage configs changed); delete {folder} to retrain it, or use another --output")


def final_care_model(results: dict[str, TrainResult]) -> str | None:
    """The CARE model folder of the last stage that produced one (``stage2/model``, or ``stage1_rank/model``
    / ``stage1/model`` when Stage II is skipped), or ``None``."""
    for stage in reversed(RECIPE_STAGES):
        if stage in results and results[stage].care_model:
            return results[stage].care_model
    return None


def _mined_training_file(paths: RecipePaths, recipe: RecipeConfig, query_model: str, document_model: str, out: Path,
                         overrides: Sequence[str], config_dir: str | Path | None) -> tuple[str, int]:
    """Stage II's training file with negatives mined by ``document_model`` (once; a rerun with the same
    mining settings reuses it, other settings mine again), and the negatives per row mined."""
    from care.train.recipes.model_negatives import MiningConfig, is_mined_with, mine_hard_negatives

    target = out / MINED_FILE  # run_recipe checked that the corpus exists
    from care.train.engine.towers import load_document_tower, training_device

    wiring = {"model.query_model": query_model, "model.document_model": document_model, "data.train_file": paths.train_file}
    stage_config = _stage_config("stage2", config_dir, overrides, wiring)
    model_config = stage_config.model
    config = MiningConfig(**{"query_prompt": model_config.query_prompt, "document_prompt": model_config.document_prompt,
                             **(recipe.mining or {})})
    if is_mined_with(target, config):
        return str(target), config.n_negatives
    # a frozen tower loads on the CPU: mine where Stage II will train (the dev set on an H200: 74 s on its 16
    # CPU cores, 6 s on the GPU)
    tower = load_document_tower(model_config, trainable=False, path=document_model).to(
        training_device(stage_config.runtime))
    mine_hard_negatives(paths.train_file, paths.corpus_file, tower, target, config)
    return str(target), config.n_negatives


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


def _alignment_file(paths: RecipePaths, out: Path) -> str:
    """Stage I's alignment data: ``paths.alignment_file``, or ``<out>/alignment.jsonl`` built from the
    train file (once)."""
    if paths.alignment_file is not None:
        return paths.alignment_file
    alignment = out / ALIGNMENT_FILE
    if not alignment.is_file():
        from care.train.recipes.alignment_data import alignment_from_training_file

        alignment_from_training_file(paths.train_file, alignment)
    return str(alignment)


def _rank_queries_file(alignment: str, out: Path) -> str:
    """``<out>/rank_queries.jsonl``: the query-side rows of ``alignment`` (training queries and corpus
    sentences; document-side rows are passages, not queries). Rewritten when the alignment file is newer."""
    from care.data.io import write_jsonl
    from care.data.training import QUERY_ALIGN, iter_training_file

    target = out / RANK_QUERIES_FILE
    if target.is_file() and target.stat().st_mtime_ns >= Path(alignment).stat().st_mtime_ns:
        return str(target)
    rows = [e.to_json() for e in iter_training_file(alignment) if e.type == QUERY_ALIGN]
    if not rows:
        raise CareError(f"{alignment}: no query-side rows (type {QUERY_ALIGN!r}) for the ranking part (stage1_rank); "
                        "build the alignment file with care curate build-train --alignment-out, or skip the "
                        "ranking part with --skip-stage1-rank")
    write_jsonl(target, rows)
    logger.info("recipe: %d query-side rows of %s -> %s (the ranking part's queries)", len(rows), alignment, target)
    return str(target)


def run_recipe(paths: RecipePaths, *, config_dir: str | Path | None = None, overrides: Sequence[str] = (),
               stages: Sequence[str] = RECIPE_STAGES, recipe: RecipeConfig | None = None,
               validation: ValidationConfig | None = None) -> dict[str, TrainResult]:
    """Run (or finish) the recipe; returns each stage's :class:`TrainResult`.

    The safety net (:mod:`care.train.recipes.validation`): unless ``validation`` turns it off, a validation split is
    carved from the training file (or ``paths.validation_task`` is used), the stages train on the rest, and
    the base models and every stage are scored on it as they finish; a stage that scores below the one it
    started from, and a final model below the base document model or the symmetric small model, are warned
    about and recorded in ``<output>/validation/`` (:func:`read_validation`).

    Args:
        paths: base models, training file, output folder, optional Stage I alignment file.
        config_dir: folder with ``init_query.yaml``, ``init_document.yaml``, ``stage1.yaml``,
            ``stage2.yaml`` and optionally ``stage1_rank.yaml`` (:data:`OPT_IN_STAGES`) (e.g.
            ``configs/care_tiny``), or ``preset:NAME`` for a shipped preset
            (:mod:`care.train.recipes.presets`); model paths, data files and output folders in them are
            replaced by the recipe's wiring. ``None``: the ``e5`` preset for an e5 document model,
            else the stages' declared defaults.
        overrides: ``key=value`` for every stage or ``stage:key=value`` for one.
        stages: subset of :data:`RECIPE_STAGES` to run (in recipe order).
        recipe: ablation switches (:class:`RecipeConfig`); they remove stages from ``stages`` and
            rewire the rest.
    """
    from care.train.recipes.presets import resolve_config_dir

    config_dir = resolve_config_dir(config_dir, paths.document_model)
    recipe = _with_folder_defaults(recipe or RecipeConfig(), config_dir, paths)
    given = list(overrides)
    overrides = [*overrides, *recipe.overrides]
    unknown = [s for s in stages if s not in RECIPE_STAGES]
    if unknown:
        raise ConfigError(f"unknown recipe stage(s) {unknown}; choose from {', '.join(RECIPE_STAGES)}")
    stages = [s for s in RECIPE_STAGES if s in stages and s not in recipe.skipped()
              and (s not in OPT_IN_STAGES or (config_dir is not None and (Path(config_dir) / f"{s}.yaml").is_file()))]
    if recipe.mining is not None and "stage2" in stages and not (paths.corpus_file and Path(paths.corpus_file).is_file()):
        # checked before the first stage, not when Stage II starts hours later
        raise ConfigError("recipe field 'mine_negatives' needs a corpus to mine from: pass the corpus file "
                          "(corpus.jsonl of {id, text}) as RecipePaths.corpus_file / --corpus"
                          + (f" ({paths.corpus_file} does not exist)" if paths.corpus_file else ""))
    out = Path(paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _record_settings(out, paths, recipe, given)
    paths, validator = _safety_net(paths, out, validation or ValidationConfig(), overrides)
    results: dict[str, TrainResult] = {}
    dirs = {s: out / s for s in RECIPE_STAGES}
    dirs.update(_finished_elsewhere(paths.finished_stages or {}))
    query_start = recipe.pretrained_query_model or paths.query_model
    query_after_init = str(dirs["init_query"] / "query") if "init_query" in stages else query_start
    doc_after_init = str(dirs["init_document"] / "document") if "init_document" in stages else paths.document_model
    query_after_stage1 = str(dirs["stage1"] / "query") if "stage1" in stages else query_after_init
    query_after_rank = str(dirs["stage1_rank"] / "query") if "stage1_rank" in stages else query_after_stage1
    stage1_file = paths.train_file if recipe.stage1_data == "finetune" else None
    for stage in RECIPE_STAGES:
        if stage not in stages:
            continue
        wiring = {
            "init_query": (query_start, None, paths.train_file),
            "init_document": (query_start, paths.document_model, paths.train_file),
            "stage1": (query_after_init, doc_after_init, stage1_file),
            "stage1_rank": (query_after_stage1, doc_after_init, stage1_file),
            "stage2": (query_after_rank, doc_after_init, paths.train_file),
        }[stage]
        query_model, document_model, train_file = wiring
        trained_as = training_stage(stage, config_dir, overrides)
        if validator is not None and not validator.scores:
            _score_base_models(validator, stages, config_dir, overrides, query_start, paths.document_model)
        done = read_result(dirs[stage])
        if done is not None and done.completed:
            _check_finished_inputs(dirs[stage], stage, query_model, document_model, trained_as)
            logger.info("recipe: %s already finished (%s), skipping", stage, dirs[stage])
            results[stage] = done
            _score_stage(validator, stage, done)
            continue
        extra: dict[str, object] = {}
        if stage == "stage2" and recipe.mining is not None:
            train_file, extra["data.n_negatives"] = _mined_training_file(paths, recipe, query_model, document_model, out,
                                                                         overrides, config_dir)
            # Stage II trains on what was mined, whatever the stage config's n_negatives (the e5 preset's is 0:
            # in-batch negatives only); an explicit ``stage2:data.n_negatives`` override still wins
        if stage == "stage1" and train_file is None:
            train_file = _alignment_file(paths, out)
        if stage == "stage1_rank":
            extra["data.bank_file"] = paths.train_file  # ranked: the training file's documents
            # else Stage I trains on the train file (its queries are ranked), or the user named the ranked queries
            if train_file is None and not sets_key(overrides, stage, "data.train_file"):
                train_file = _rank_queries_file(_alignment_file(paths, out), out)
        settings: dict[str, object] = {"stage": trained_as, "output_dir": dirs[stage],
                                       "model.query_model": query_model, "model.document_model": document_model,
                                       "data.train_file": train_file, **extra}
        if stage in ("stage1", "stage1_rank"):
            settings["model.teacher.kind"] = "document"
        config = _stage_config(stage, config_dir, overrides, settings)
        logger.info("recipe: running %s -> %s", stage, dirs[stage])
        results[stage] = train(config, resume=True)
        _score_stage(validator, stage, results[stage])
    if validator is not None:
        _report_validation(validator, results, out)
    return results


def _finished_elsewhere(stages: dict[str, str]) -> dict[str, Path]:
    """``RecipePaths.finished_stages`` as stage folders, each checked to be a finished recipe stage."""
    unknown = sorted(set(stages) - set(RECIPE_STAGES))
    if unknown:
        raise ConfigError(f"finished_stages: unknown recipe stage(s) {unknown}; choose from {', '.join(RECIPE_STAGES)}")
    for stage, folder in stages.items():
        done = read_result(folder)
        if done is None or not done.completed:
            raise CareError(f"{folder}: not a finished {stage} (no completed train_result.json); finish that run first")
    return {stage: Path(folder) for stage, folder in stages.items()}


# ------------------------------------------------------------------------------------- the safety net
#: Labels of the base models in the validation record.
BASE_QUERY, BASE_DOCUMENT = "base query model", "base document model"
#: Where each stage starts from, by preference (the first one scored is its start).
STARTS: dict[str, tuple[str, ...]] = {
    "init_query": (BASE_QUERY,), "init_document": (BASE_DOCUMENT,), "stage1": ("init_query", BASE_QUERY),
    "stage1_rank": ("stage1", "init_query", BASE_QUERY),
    "stage2": ("stage1_rank", "stage1", "init_query", BASE_QUERY)}
#: The model each stage produces for scoring: its symmetric tower or its CARE (asymmetric) folder.
SCORED_MODEL: dict[str, str] = {"init_query": "query_model", "init_document": "document_model"}
VALIDATION_FOLDER = "validation"
VALIDATION_REPORT = "report.md"


def _seed(overrides: Sequence[str]) -> int:
    """The run's seed from a ``seed=N`` override (0 without one)."""
    values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].strip() == "seed"]
    return int(values[-1]) if values else 0


def _safety_net(paths: RecipePaths, out: Path, config: ValidationConfig,
                overrides: Sequence[str]) -> tuple[RecipePaths, StageValidator | None]:
    """``paths`` with the training file minus the validation split (when the recipe carves one), and the
    validator of every stage (``None`` when validation is off or the file is too small)."""
    folder = out / VALIDATION_FOLDER
    if not config.enabled:
        return paths, None
    task = paths.validation_task
    if task is None:
        split = carve_validation(paths.train_file, paths.corpus_file, folder, config, seed=_seed(overrides))
        if split is None:
            return paths, None
        task = str(split.task_dir)
        alignment = paths.alignment_file
        if alignment is not None:
            alignment = str(without_held_out(alignment, split, folder / ALIGNMENT_FILE))
        paths = replace(paths, train_file=str(split.train_file), alignment_file=alignment)
    cache = Path(paths.cache_dir) if paths.cache_dir else folder / "cache"
    return paths, StageValidator(Path(task), folder, config, cache_dir=cache, instruction=paths.validation_instruction)


def prompted_spec(model: str, query_prompt: str | None, document_prompt: str | None) -> str:
    """The spec that encodes ``model`` as a stage trained it: a stage that put prefixes on both sides (the ``e5``
    preset's ``query: `` / ``passage: ``) gives ``FOLDER?query_prefix=..&document_prefix=..&instructions=false``
    (an existing folder made absolute, so an index or a service reads it from anywhere); otherwise ``model``
    as it is (its task instructions apply)."""
    from urllib.parse import urlencode

    if not (query_prompt and document_prompt):
        return model
    options = urlencode({"query_prefix": query_prompt, "document_prefix": document_prompt, "instructions": "false"})
    return f"{Path(model).resolve() if Path(model).exists() else model}?{options}"


def stage_model_spec(model: str, stage_dir: str | Path) -> str:
    """:func:`prompted_spec` of a folder written by a recipe stage, with the prompts of the stage's saved
    config (``train_config.yaml``; a folder without one is returned as it is)."""
    from care.train.engine.trainer import CONFIG_FILE

    saved = Path(stage_dir) / CONFIG_FILE
    model_config = (read_config_file(saved, "stage config").get("model") or {}) if saved.is_file() else {}
    return prompted_spec(model, model_config.get("query_prompt"), model_config.get("document_prompt"))


def _base_spec(model: str, stage: str, config_dir: str | Path | None, overrides: Sequence[str]) -> str:
    """:func:`prompted_spec` of a base tower with the prompts ``stage`` trains it with."""
    placeholders = {"model.query_model": "-", "model.document_model": "-", "data.train_file": "-"}  # only prompts are read
    config = _stage_config(stage, config_dir, overrides, placeholders).model
    return prompted_spec(model, config.query_prompt, config.document_prompt)


def _score_base_models(validator: StageValidator, stages: Sequence[str], config_dir: str | Path | None,
                       overrides: Sequence[str], query_model: str, document_model: str) -> None:
    """The towers the recipe starts from, used as they are (with the prompts of the first stage that trains
    each): what the first stages must beat; the base document model is also what the final model must beat
    (e5 zero-shot for e5 towers)."""
    query_stage = next((s for s in ("init_query", "stage1", "stage1_rank", "stage2") if s in stages), None)
    document_stage = next((s for s in ("init_document", "stage1", "stage2") if s in stages), None)
    if query_stage is not None:
        validator.score(BASE_QUERY, _base_spec(query_model, query_stage, config_dir, overrides))
    if document_stage is not None:
        validator.score(BASE_DOCUMENT, _base_spec(document_model, document_stage, config_dir, overrides))


def _score_stage(validator: StageValidator | None, stage: str, result: TrainResult) -> None:
    """Score a finished stage's model on validation, against the stage it started from."""
    if validator is None:
        return
    folder = getattr(result, SCORED_MODEL.get(stage, "care_model"))
    if not folder:
        return
    start = next((s for s in STARTS[stage] if s in validator.scores), None)
    validator.score(stage, stage_model_spec(folder, result.output_dir), started_from=start,
                    asymmetric=stage not in SCORED_MODEL)


def _report_validation(validator: StageValidator, results: dict[str, TrainResult], out: Path) -> None:
    """Log the validation table and the warnings about the final model; write ``validation/report.md``."""
    from care.data.io import atomic_write

    final = next((s for s in reversed(RECIPE_STAGES) if s in validator.scores and s not in SCORED_MODEL), None)
    warnings = validator.warnings(final, (BASE_DOCUMENT, "init_query")) if final else []
    table = validator.table()
    logger.info("recipe: validation scores (%s)\n%s", validator.task_dir, table)
    for warning in warnings:
        logger.warning("recipe: %s", warning)
    with atomic_write(out / VALIDATION_FOLDER / VALIDATION_REPORT) as fh:
        fh.write(f"# Validation of {out}\n\n{table}\n" + "".join(f"- warning: {w}\n" for w in warnings))


def read_validation(output_dir: str | Path) -> dict[str, Any]:
    """The validation record of a recipe folder: ``{"task", "metric", "models": {label: scores...}}`` (``{}``
    when the recipe ran without validation)."""
    path = Path(output_dir) / VALIDATION_FOLDER / SCORES_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
