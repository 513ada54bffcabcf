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
from pathlib import Path
from typing import Any

from care.config import read_config_file
from care.errors import CareError
from care.train.engine.trainer import TrainResult, read_result, train
from care.train.overrides import StageSetting, format_settings
from care.train.recipes.plan import (
    ALIGNMENT_FILE,
    MINED_FILE,
    OPT_IN_STAGES,
    PLAN_FILE,
    RANK_QUERIES_FILE,
    RECIPE_FILE,
    RECIPE_STAGES,
    STAGE_CHOICES,
    TRAINING_STAGE,
    RecipeConfig,
    RecipePaths,
    RecipePlan,
    load_recipe_config,
    mining_config,
    plan_recipe,
    training_stage,
)
from care.train.recipes.validation import (
    SCORES_FILE,
    StageValidator,
    carve_validation,
    without_held_out,
)

#: Names that moved to :mod:`care.train.recipes.plan` and are read from here too.
__all__ = ["ALIGNMENT_FILE", "MINED_FILE", "OPT_IN_STAGES", "PLAN_FILE", "RANK_QUERIES_FILE", "RECIPE_FILE",
           "RECIPE_STAGES", "STAGE_CHOICES", "TRAINING_STAGE", "RecipeConfig", "RecipePaths", "RecipePlan",
           "final_care_model", "load_recipe_config", "plan_recipe", "read_validation", "record_run_settings",
           "result_overrides", "run_recipe", "stage_model_spec", "training_stage"]

logger = logging.getLogger(__name__)


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


def result_overrides(settings: Sequence[StageSetting]) -> list[str]:
    """``settings`` without the reporting-only ones (:data:`REPORTING_KEYS`), in the user's syntax, as recorded
    for a run."""
    return format_settings(s for s in settings if s.key not in REPORTING_KEYS)


def _record_settings(plan: RecipePlan) -> None:
    """Record the effective recipe in ``<output>/recipe.json`` (refusing a rerun with other settings). Mining
    is recorded as what happens: ``null`` for none, whether unset or ``{n_negatives: 0}``, so a folder
    trained before a config folder mined by default reruns with ``--mine-negatives 0``."""
    recipe = plan.recipe
    settings = {"recipe": {**recipe.to_dict(), "mine_negatives": recipe.mining}, "query_model": plan.query_start,
                "document_model": plan.paths.document_model, "overrides": result_overrides(plan.settings)}
    fix = "give each ablation its own --output folder"
    if recipe.mining is not None:
        fix += " (a folder trained without mining: rerun it with --mine-negatives 0 / mine_negatives: {n_negatives: 0})"
    record_run_settings(plan.output_dir / RECIPE_FILE, settings, "recipe", fix)


def _same_model(recorded: str | None, wired: str) -> bool:
    """The same string, or two spellings of one existing folder."""
    if recorded == wired:
        return True
    return recorded is not None and Path(recorded).exists() and Path(recorded).resolve() == Path(wired).resolve()


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


def _mine_stage2_file(plan: RecipePlan) -> None:
    """Stage II's training file (the plan's ``stage2`` ``data.train_file``) with negatives mined by its document
    tower (once; a rerun with the same mining settings reuses it, other settings mine again)."""
    from care.train.engine.towers import load_document_tower, training_device
    from care.train.recipes.model_negatives import is_mined_with, mine_hard_negatives

    stage_config = plan.configs["stage2"]
    model_config = stage_config.model
    config = mining_config(plan.recipe, query_prompt=model_config.query_prompt,
                           document_prompt=model_config.document_prompt)
    target = plan.output_dir / MINED_FILE  # run_recipe checked that the corpus exists
    if is_mined_with(target, config):
        return
    # a frozen tower loads on the CPU: mine where Stage II will train (the dev set on an H200: 74 s on its 16
    # CPU cores, 6 s on the GPU)
    tower = load_document_tower(model_config, trainable=False, path=model_config.document_model).to(
        training_device(stage_config.runtime))
    mine_hard_negatives(plan.paths.train_file, plan.paths.corpus_file, tower, target, config)


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
    """Execute (or finish) a recipe plan (:func:`care.train.recipes.plan.plan_recipe`); returns each stage's
    :class:`TrainResult`. The files the plan names are made here, once: the validation split, Stage I's
    alignment data, the ranking part's queries and Stage II's mined negatives; the plan is written beside the
    stages (``plan.json``).

    The safety net (:mod:`care.train.recipes.validation`): unless ``plan.validation`` turns it off, a validation
    split is carved from the training file (or ``paths.validation_task`` is used), the stages train on the rest,
    and the base models and every stage are scored on it as they finish; a stage that scores below the one it
    started from, and a final model below the base document model or the symmetric small model, are warned
    about and recorded in ``<output>/validation/`` (:func:`read_validation`).
    """
    from care.data.io import write_json

    paths = plan.paths
    if plan.recipe.mining is not None and "stage2" in plan.stages and not (
            paths.corpus_file and Path(paths.corpus_file).is_file()):
        # checked before the first stage, not when Stage II starts hours later
        raise CareError("recipe field 'mine_negatives' needs a corpus to mine from: pass the corpus file "
                        "(corpus.jsonl of {id, text}) as RecipePaths.corpus_file / --corpus"
                        + (f" ({paths.corpus_file} does not exist)" if paths.corpus_file else ""))
    out = plan.output_dir
    out.mkdir(parents=True, exist_ok=True)
    _record_settings(plan)
    plan, validator = _safety_net(plan)
    write_json(out / PLAN_FILE, plan.to_dict())
    results: dict[str, TrainResult] = {}
    for stage in plan.stages:
        config = plan.configs[stage]
        folder = Path(config.output_dir)
        if validator is not None and not validator.scores:
            _score_base_models(validator, plan)
        done = read_result(folder)
        if done is not None and done.completed:
            _check_finished_inputs(folder, stage, config.model.query_model, config.model.document_model, config.stage)
            logger.info("recipe: %s already finished (%s), skipping", stage, folder)
            results[stage] = done
            _score_stage(validator, stage, done)
            continue
        _make_stage_files(plan, stage)
        logger.info("recipe: running %s -> %s", stage, folder)
        results[stage] = train(config, resume=True)
        _score_stage(validator, stage, results[stage])
    if validator is not None:
        _report_validation(validator, results, out)
    return results


def _make_stage_files(plan: RecipePlan, stage: str) -> None:
    """The files ``stage``'s config trains on that the recipe makes: Stage I's alignment data (built from the
    training file), the ranking part's queries, Stage II's mined negatives."""
    out, train_file = plan.output_dir, plan.configs[stage].data.train_file
    if stage == "stage1" and train_file == str(out / ALIGNMENT_FILE):
        _alignment_file(plan.paths, out)
    if stage == "stage1_rank" and train_file == str(out / RANK_QUERIES_FILE):
        _rank_queries_file(_alignment_file(plan.paths, out), out)
    if stage == "stage2" and plan.recipe.mining is not None:
        _mine_stage2_file(plan)


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


def _safety_net(plan: RecipePlan) -> tuple[RecipePlan, StageValidator | None]:
    """``plan`` trained on the training file minus the validation split (when the recipe carves one), and the
    validator of every stage (``None`` when validation is off or the file is too small)."""
    paths, config = plan.paths, plan.validation
    folder = plan.output_dir / VALIDATION_FOLDER
    if not config.enabled:
        return plan, None
    task = paths.validation_task
    if task is None:
        split = carve_validation(paths.train_file, paths.corpus_file, folder, config, seed=plan.seed)
        if split is None:
            return plan, None
        task = str(split.task_dir)
        alignment = paths.alignment_file
        if alignment is not None:
            alignment = str(without_held_out(alignment, split, folder / ALIGNMENT_FILE))
        plan = plan.with_paths(train_file=str(split.train_file), alignment_file=alignment)
    cache = Path(paths.cache_dir) if paths.cache_dir else folder / "cache"
    return plan, StageValidator(Path(task), folder, config, cache_dir=cache, instruction=paths.validation_instruction)


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


def _score_base_models(validator: StageValidator, plan: RecipePlan) -> None:
    """The towers the recipe starts from, used as they are (with the prompts of the first stage that trains
    each): what the first stages must beat; the base document model is also what the final model must beat
    (e5 zero-shot for e5 towers)."""
    query_stage = next((s for s in ("init_query", "stage1", "stage1_rank", "stage2") if s in plan.stages), None)
    document_stage = next((s for s in ("init_document", "stage1", "stage2") if s in plan.stages), None)
    for label, model, stage in ((BASE_QUERY, plan.query_start, query_stage),
                                (BASE_DOCUMENT, plan.paths.document_model, document_stage)):
        if stage is not None:
            prompts = plan.configs[stage].model
            validator.score(label, prompted_spec(model, prompts.query_prompt, prompts.document_prompt))


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
