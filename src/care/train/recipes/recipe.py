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
from dataclasses import replace
from pathlib import Path
from typing import Any

from care.config import ConfigError, read_config_file
from care.errors import CareError
from care.train.engine.config import TrainConfig
from care.train.engine.static_query import is_static_folder
from care.train.engine.towers import is_sentence_transformer_folder
from care.train.engine.trainer import TrainResult, read_result, train
from care.train.recipes.plan import (  # noqa: F401 (RecipePaths, RecipeConfig, load_recipe_config: imported from here)
    MINING_OFF,
    RECIPE_STAGES,
    STAGE1_DATA,
    RecipeConfig,
    RecipePaths,
    RecipePlan,
    load_recipe_config,
)
from care.train.recipes.static_query import static_tower_settings
from care.train.recipes.validation import (
    SCORES_FILE,
    StageValidator,
    ValidationConfig,
    carve_validation,
    without_held_out,
)
from care.train.stage_settings import StageSetting, apply_settings, for_stage, sets

logger = logging.getLogger(__name__)

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


def _stage_config(stage: str, config_dir: str | Path | None, settings: Sequence[StageSetting],
                  wiring: dict[str, object]) -> TrainConfig:
    """The stage's YAML from ``config_dir`` (``<stage>.yaml``) or the built-in defaults, then the
    recipe's wiring (``wiring``: dotted key -> value), then the plan's settings for the stage
    (:func:`care.train.stage_settings.for_stage`: every-stage ones, then the stage's own); validated.
    """
    source, data = _stage_data(stage, config_dir)
    data = apply_settings(data, {k: str(v) if isinstance(v, Path) else v for k, v in wiring.items()})
    return TrainConfig.from_dict(apply_settings(data, for_stage(settings, stage)), source=source)


def _stage_data(stage: str, config_dir: str | Path | None) -> tuple[str | None, dict[str, Any]]:
    """The stage's YAML file (its path, its dict) from ``config_dir``, else ``(None,`` its declared defaults
    ``)`` (:mod:`care.train.engine.stage_catalog`)."""
    path = Path(config_dir) / f"{stage}.yaml" if config_dir is not None else None
    if path is not None and path.is_file():
        return str(path), read_config_file(path)
    return None, TrainConfig.for_stage(stage).to_dict()


def _document_pooling(stage: str, config_dir: str | Path | None, settings: Sequence[StageSetting]) -> str | None:
    """How ``stage`` pools a plain document folder now: its file's (or defaults') ``model.document_pooling``, then
    the plan's settings."""
    data = apply_settings(_stage_data(stage, config_dir)[1], for_stage(settings, stage))
    return (data.get("model") or {}).get("document_pooling")


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


def recorded_settings(settings: Sequence[StageSetting]) -> list[dict[str, Any]]:
    """``settings`` without the reporting-only ones (:data:`REPORTING_KEYS`), as recorded for a run."""
    return [s.to_dict() for s in settings if s.key not in REPORTING_KEYS]


def _record_settings(out: Path, plan: RecipePlan, recipe: RecipeConfig, static: bool = False) -> None:
    """Record the effective recipe in ``out/recipe.json`` (refusing a rerun with other settings). Mining
    is recorded as what happens: ``null`` for none, whether unset or ``{n_negatives: 0}``, so a folder
    trained before a config folder mined by default reruns with ``--mine-negatives 0``; the static tower's settings
    only when the query tower is ``static`` (then ``query_depth`` is 0, :data:`care.encoders.static.STATIC_DEPTH`)."""
    from care.encoders.static import STATIC_DEPTH

    recorded = recipe.to_dict()
    if not static:
        recorded.pop("static_tower", None)
    settings = {"recipe": {**recorded, "mine_negatives": recipe.mining},
                **({"query_depth": STATIC_DEPTH} if static else {}),
                "query_model": recipe.pretrained_query_model or plan.paths.query_model,
                "document_model": plan.paths.document_model,
                "settings": recorded_settings(plan.settings)}
    fix = "give each ablation its own --output folder"
    if recipe.mining is not None:
        fix += " (a folder trained without mining: rerun it with --mine-negatives 0 / mine_negatives: {n_negatives: 0})"
    record_run_settings(out / RECIPE_FILE, settings, "recipe", fix)


def _same_model(recorded: str | None, wired: str) -> bool:
    """The same string, or two spellings of one existing folder."""
    if recorded == wired:
        return True
    return recorded is not None and Path(recorded).exists() and Path(recorded).resolve() == Path(wired).resolve()


def training_stage(stage: str, config_dir: str | Path | None, settings: Sequence[StageSetting]) -> str:
    """The training stage recipe stage ``stage`` runs as: the last ``<stage>:stage=NAME`` override, else its
    config file's ``stage:`` field when that is one of the stage's :data:`STAGE_CHOICES`, else
    :data:`TRAINING_STAGE` or the stage's own name (``stage1_rank.yaml`` says ``bank_distill``; a file copied
    from another stage does not change what the recipe trains).

    Raises:
        ConfigError: an override names a training stage this recipe stage cannot run as.
    """
    default = TRAINING_STAGE.get(stage, stage)
    choices = STAGE_CHOICES.get(stage, (default,))
    named = [s.value for s in settings if s.stage == stage and s.key == "stage"]
    if named:
        if named[-1] not in choices:
            raise ConfigError(f"setting '{stage}:stage={named[-1]}': the recipe's {stage} trains as one of "
                              f"{', '.join(choices)}")
        return str(named[-1])
    path = Path(config_dir) / f"{stage}.yaml" if config_dir is not None else None
    in_file = read_config_file(path).get("stage") if path is not None and path.is_file() else None
    return in_file if in_file in choices else default


def _check_finished_inputs(folder: Path, stage: str, query_model: str | None, document_model: str | None,
                           trained_as: str | None = None, document_pooling: str | None = None) -> None:
    """A finished stage is reused only if it was trained from the towers the recipe feeds it now, and as the
    training stage the recipe runs it as now (``trained_as``): a stage added before it (e.g. a preset gaining
    ``stage1_rank``) or a preset that changes Stage II's objective must not leave it trained the old way. A plain
    document folder (no sentence-transformers modules: e5's export) must also be pooled as now
    (``document_pooling``): a stage finished before the e5 preset pooled it by its mean is not reused.

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
    plain = document_model is not None and Path(document_model).is_dir() and not is_sentence_transformer_folder(
        document_model)
    if plain and document_pooling is not None and model.get("document_pooling", document_pooling) != document_pooling:
        changed.append("document_pooling")
        before["document_pooling"], wired["document_pooling"] = model.get("document_pooling"), document_pooling
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
                         settings: Sequence[StageSetting], config_dir: str | Path | None) -> tuple[str, int]:
    """Stage II's training file with negatives mined by ``document_model`` (once; a rerun with the same
    mining settings reuses it, other settings mine again), and the negatives per row mined."""
    from care.train.recipes.model_negatives import MiningConfig, is_mined_with, mine_hard_negatives

    target = out / MINED_FILE  # run_recipe checked that the corpus exists
    from care.train.engine.towers import load_document_tower, training_device

    wiring = {"model.query_model": query_model, "model.document_model": document_model, "data.train_file": paths.train_file}
    stage_config = _stage_config("stage2", config_dir, settings, wiring)
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


def run_recipe(plan: RecipePlan) -> dict[str, TrainResult]:
    """Run (or finish) the recipe ``plan`` describes (:class:`~care.train.recipes.plan.RecipePlan`); returns each
    stage's :class:`TrainResult`.

    The safety net (:mod:`care.train.recipes.validation`): unless ``plan.validation`` turns it off, a validation
    split is carved from the training file (or ``plan.paths.validation_task`` is used), the stages train on the
    rest, and the base models and every stage are scored on it as they finish; a stage that scores below the one
    it started from, and a final model below the base document model or the symmetric small model, are warned
    about and recorded in ``<output>/validation/`` (:func:`read_validation`).

    ``plan.config_dir`` is a folder with ``init_query.yaml``, ``init_document.yaml``, ``stage1.yaml``,
    ``stage2.yaml`` and optionally ``stage1_rank.yaml`` (:data:`OPT_IN_STAGES`) (e.g. ``configs/care_tiny``), or
    ``preset:NAME`` for a shipped preset (:mod:`care.train.recipes.presets`); model paths, data files and output
    folders in them are replaced by the recipe's wiring; ``None``: the ``e5`` preset for an e5 document model,
    else the stages' declared defaults. The ablation switches (``plan.recipe``) remove stages from
    ``plan.stages`` and rewire the rest.
    """
    from care.train.recipes.presets import resolve_config_dir

    paths = plan.paths
    config_dir = resolve_config_dir(plan.config_dir, paths.document_model)
    recipe = _with_folder_defaults(plan.recipe, config_dir, paths)
    settings = replace(plan, recipe=recipe).all_settings  # the run's, then the ablation's
    stages = [s for s in RECIPE_STAGES if s in plan.stages and s not in recipe.skipped()
              and (s not in OPT_IN_STAGES or (config_dir is not None and (Path(config_dir) / f"{s}.yaml").is_file()))]
    if recipe.mining is not None and "stage2" in stages and not (paths.corpus_file and Path(paths.corpus_file).is_file()):
        # checked before the first stage, not when Stage II starts hours later
        raise ConfigError("recipe field 'mine_negatives' needs a corpus to mine from: pass the corpus file "
                          "(corpus.jsonl of {id, text}) as RecipePaths.corpus_file / --corpus"
                          + (f" ({paths.corpus_file} does not exist)" if paths.corpus_file else ""))
    out = Path(paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    static = is_static_folder(recipe.pretrained_query_model or paths.query_model)
    if static:  # the static tower's own learning rate and token weights, before the run's settings (which win)
        settings = (*static_tower_settings(recipe.static_tower, stages), *settings)
        logger.info("recipe: the query tower is static (a lookup, depth 0): %s", recipe.static_tower.to_dict())
    _record_settings(out, plan, recipe, static)
    paths, validator = _safety_net(paths, out, plan.validation, plan.seed)
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
        trained_as = training_stage(stage, config_dir, settings)
        if validator is not None and not validator.scores:
            _score_base_models(validator, stages, config_dir, settings, query_start, paths.document_model)
        done = read_result(dirs[stage])
        if done is not None and done.completed:
            _check_finished_inputs(dirs[stage], stage, query_model, document_model, trained_as,
                                   _document_pooling(stage, config_dir, settings))
            logger.info("recipe: %s already finished (%s), skipping", stage, dirs[stage])
            results[stage] = done
            _score_stage(validator, stage, done)
            continue
        extra: dict[str, object] = {}
        if stage == "stage2" and recipe.mining is not None:
            train_file, extra["data.n_negatives"] = _mined_training_file(paths, recipe, query_model, document_model, out,
                                                                         settings, config_dir)
            # Stage II trains on what was mined, whatever the stage config's n_negatives (the e5 preset's is 0:
            # in-batch negatives only); an explicit ``stage2:data.n_negatives`` setting still wins
        if stage == "stage1" and train_file is None:
            train_file = _alignment_file(paths, out)
        if stage == "stage1_rank":
            extra["data.bank_file"] = paths.train_file  # ranked: the training file's documents
            # else Stage I trains on the train file (its queries are ranked), or the user named the ranked queries
            if train_file is None and not sets(settings, "data.train_file", stage):
                train_file = _rank_queries_file(_alignment_file(paths, out), out)
        wired: dict[str, object] = {"stage": trained_as, "output_dir": dirs[stage],
                                       "model.query_model": query_model, "model.document_model": document_model,
                                       "data.train_file": train_file, **extra}
        if stage in ("stage1", "stage1_rank"):
            wired["model.teacher.kind"] = "document"
        config = _stage_config(stage, config_dir, settings, wired)
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


def _safety_net(paths: RecipePaths, out: Path, config: ValidationConfig,
                seed: int) -> tuple[RecipePaths, StageValidator | None]:
    """``paths`` with the training file minus the validation split (when the recipe carves one), and the
    validator of every stage (``None`` when validation is off or the file is too small)."""
    folder = out / VALIDATION_FOLDER
    if not config.enabled:
        return paths, None
    task = paths.validation_task
    if task is None:
        split = carve_validation(paths.train_file, paths.corpus_file, folder, config, seed=seed)
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


def _base_spec(model: str, stage: str, config_dir: str | Path | None, settings: Sequence[StageSetting]) -> str:
    """:func:`prompted_spec` of a base tower with the prompts ``stage`` trains it with."""
    placeholders = {"model.query_model": "-", "model.document_model": "-", "data.train_file": "-"}  # only prompts are read
    config = _stage_config(stage, config_dir, settings, placeholders).model
    return prompted_spec(model, config.query_prompt, config.document_prompt)


def _score_base_models(validator: StageValidator, stages: Sequence[str], config_dir: str | Path | None,
                       settings: Sequence[StageSetting], query_model: str, document_model: str) -> None:
    """The towers the recipe starts from, used as they are (with the prompts of the first stage that trains
    each): what the first stages must beat; the base document model is also what the final model must beat
    (e5 zero-shot for e5 towers)."""
    query_stage = next((s for s in ("init_query", "stage1", "stage1_rank", "stage2") if s in stages), None)
    document_stage = next((s for s in ("init_document", "stage1", "stage2") if s in stages), None)
    if query_stage is not None:
        validator.score(BASE_QUERY, _base_spec(query_model, query_stage, config_dir, settings))
    if document_stage is not None:
        validator.score(BASE_DOCUMENT, _base_spec(document_model, document_stage, config_dir, settings))


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
