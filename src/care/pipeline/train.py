"""Step 3 of a run: train the configured recipes on the run's training file.

``train_care``: CARE's recipe (:func:`care.train.recipes.recipe.run_recipe`: init_query = the symmetric small
model, init_document = the symmetric large model, Stage I, Stage II = CARE) from ``models.query`` /
``models.document``; ``tiny`` builds a character vocabulary from the run's texts and random-init tiny
towers (:func:`care.models.presets.make_tiny_models`), whose document tower is then fully fine-tuned.
Ablations (``recipes.care.ablations``) train in their own folders and start from the finished
initialisations.

``train_student``: the student (:func:`care.train.recipes.student.train_student`) against ``models.teacher``,
and with ``recipes.student.symmetric`` its cut fine-tuned on both sides.

``train_baselines``: the paper's baselines (:func:`care.train.recipes.baselines.run_baseline`) on CARE's trained
document tower (or ``models.document``) and query base.

Each returns ``{"models": {row label: model spec}, ...}``; everything resumes (finished stages are skipped,
an interrupted one continues from its last checkpoint).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from care.data.text_files import texts_of_files
from care.errors import CareError
from care.pipeline.config import TINY
from care.pipeline.context import EMBEDDINGS_CACHE, RunContext
from care.pipeline.sources import VALIDATION_TASK, corpus_file, evaluated_tasks
from care.train.stage_settings import StageSetting, parse_settings

logger = logging.getLogger(__name__)

CARE_FOLDER, STUDENT_FOLDER, BASELINES_FOLDER, ABLATIONS_FOLDER = "care", "student", "baselines", "ablations"
TINY_FOLDER = "base"
#: The run cache's folder of towers exported from a spec (``e5``, ``e5?layers=6``).
TOWERS_CACHE = "towers"
#: The shared run cache's folder of Stage I's teacher vectors (``cache_dir`` set: runs of several seeds share them).
TEACHER_CACHE = "teacher"
#: Recipe stages that train on the training file's pairs (``recipes.care.max_train_examples`` caps them).
PAIR_STAGES: tuple[str, ...] = ("init_query", "init_document", "stage2")
#: Recipe stages that train on Stage I's alignment data (``recipes.care.max_alignment_rows`` caps them).
ALIGNMENT_STAGES: tuple[str, ...] = ("stage1", "stage1_rank")
#: Recipe stages that may read the frozen teacher's vectors: Stage I's parts, and Stage II where it trains as
#: ``stage1_sft`` (the query tower alone against the frozen document tower's cached answers, ``stage2:stage=stage1_sft``).
TEACHER_STAGES: tuple[str, ...] = (*ALIGNMENT_STAGES, "stage2")
#: The validation check's row of Stage I's alignment part when a ranking part follows it (whose model is Stage I's row).
STAGE1_ALIGNMENT_LABEL = "Stage I alignment part"
#: Stages whose output a recipe ablation shares with the full recipe when it keeps both initialisations.
SHARED_INIT_STAGES: tuple[str, ...] = ("init_query", "init_document")


def tokenizer_texts(ctx: RunContext) -> list[str]:
    """Texts a tiny character vocabulary is built from: the training file's and the corpus's (title + text)."""
    return sorted(set(texts_of_files([ctx.train_file, corpus_file(ctx)])))


def base_towers(ctx: RunContext) -> tuple[str, str]:
    """CARE's base query / document towers: the configured ones (``e5`` / ``e5?layers=N`` exported into the
    run's cache once, :func:`care.models.tower_spec.resolve_tower_spec`), or tiny ones built once from the
    run's texts."""
    from care.models.tower_spec import parse_tower_spec, resolve_tower_spec

    models = ctx.config.models
    query, document = (resolve_tower_spec(spec, ctx.cache_dir() / TOWERS_CACHE) if parse_tower_spec(spec) else spec
                       for spec in (models.query, models.document))
    if TINY not in (query, document):
        return query, document
    from care.models.presets import TINY_DOCUMENT_DIRNAME, TINY_QUERY_DIRNAME, make_tiny_models

    base = ctx.model_dir(CARE_FOLDER, TINY_FOLDER)
    if not (base / TINY_DOCUMENT_DIRNAME).is_dir():
        make_tiny_models(tokenizer_texts(ctx), base, seed=ctx.config.seed)
    return (str(base / TINY_QUERY_DIRNAME) if query == TINY else query,
            str(base / TINY_DOCUMENT_DIRNAME) if document == TINY else document)


def care_settings(ctx: RunContext) -> tuple[StageSetting, ...]:
    """The recipe's stage settings, typed: the run's seed and reporting, ``recipes.care``'s typed fields, the
    query budget's (:attr:`RunContext.recipe_settings`), then ``recipes.care.overrides`` (user text, parsed here)."""
    recipe, config = ctx.config.recipes.care, ctx.config
    typed = {"optim.epochs": recipe.epochs, "optim.batch_size": recipe.batch_size, "optim.lr": recipe.lr,
             "model.query_max_seq_length": recipe.query_max_length,
             "model.document_max_seq_length": recipe.document_max_length}
    out = [StageSetting("seed", config.seed), StageSetting("runtime.log_with", None),
           StageSetting("runtime.progress_bar", bool(config.show_progress)),
           StageSetting("optim.grad_cache_chunk_size", None),
           *(StageSetting(key, value) for key, value in typed.items() if value is not None),
           *(StageSetting("data.max_examples", recipe.max_train_examples, stage) for stage in PAIR_STAGES
             if recipe.max_train_examples is not None),
           *(StageSetting("data.max_examples", recipe.max_alignment_rows, stage) for stage in ALIGNMENT_STAGES
             if recipe.max_alignment_rows is not None)]
    every = {"checkpoint.every_steps": recipe.checkpoint_every, "checkpoint.every_minutes": recipe.checkpoint_minutes}
    if recipe.rank_bank_size is not None:
        out.append(StageSetting("loss.bank_size", recipe.rank_bank_size, "stage1_rank"))
    out += [StageSetting(key, value) for key, value in every.items() if value is not None]
    if recipe.query_prompt is not None:
        out.append(StageSetting("model.query_prompt", recipe.query_prompt))
    if recipe.init_negatives is not None:
        out += [StageSetting("data.n_negatives", recipe.init_negatives, stage) for stage in SHARED_INIT_STAGES]
    if recipe.stage2_negatives is not None:
        out.append(StageSetting("data.n_negatives", recipe.stage2_negatives, "stage2"))
    if config.cache_dir:  # a cache shared by runs (seeds) also holds Stage I's teacher vectors, keyed by teacher + texts
        out += [StageSetting("model.teacher.cache_dir", str(ctx.cache_dir(TEACHER_CACHE)), stage)
                for stage in TEACHER_STAGES]
    if config.models.document == TINY and recipe.tiny_document_dims:  # MRL-trained at its own small widths
        out += [StageSetting("model.truncate_to_query_width", False, "init_document"),
                StageSetting("loss.matryoshka_dims", list(recipe.tiny_document_dims), "init_document")]
    full = recipe.full_fine_tune_document
    if full or (full is None and config.models.document == TINY):
        out += [StageSetting("model.lora", None, "init_document"), StageSetting("model.lora", None, "stage2")]
    return (*out, *ctx.recipe_settings, *parse_settings(recipe.overrides, source="recipes.care.overrides: item"))


def _share_initialisations(source: Path, target: Path) -> None:
    """Give an ablation's folder the full recipe's finished initialisations (hard links: no extra disk)."""
    from care.data.io import link_tree
    from care.train.engine.trainer import read_result

    for stage in SHARED_INIT_STAGES:
        done = read_result(source / stage)
        if done is not None and done.completed and not (target / stage).exists():
            link_tree(source / stage, target / stage)


def care_alignment_file(ctx: RunContext, train_file: str, out: Path, *, static: bool = False) -> str | None:
    """``<out>/alignment.jsonl`` (built once) with the questions of ``inputs.alignment_queries`` and
    ``recipes.care.alignment_sentences`` corpus sentences on the query side, after the training file's queries — every
    corpus sentence, query-side rows only, for a ``static`` query tower whose ``recipes.care.static_tower.corpus_sentences``
    holds and where ``alignment_sentences`` is unset; ``None`` when none of these applies (the recipe builds its own
    from the training file)."""
    from care.train.recipes.recipe import ALIGNMENT_FILE

    recipe = ctx.config.recipes.care
    limit = recipe.alignment_sentences
    every = static and limit is None and recipe.static_tower.corpus_sentences and _mining_corpus(ctx) is not None
    question_files = ctx.config.inputs.alignment_queries
    if not limit and not every and not question_files:
        return None
    target = out / ALIGNMENT_FILE
    if not target.is_file():
        from care.train.recipes.alignment_data import alignment_from_training_file, corpus_sentences, question_texts

        extra = question_texts(question_files)
        if limit or every:
            longest = ctx.config.recipes.care.alignment_sentence_max_chars
            extra += corpus_sentences(corpus_file(ctx), limit=limit or None, seed=ctx.config.seed,
                                      titles=ctx.config.recipes.care.alignment_sentence_titles is not False,
                                      **({"max_chars": longest} if longest else {}))
        out.mkdir(parents=True, exist_ok=True)
        documents = recipe.alignment_documents if recipe.alignment_documents is not None else not every
        alignment_from_training_file(train_file, target, extra_queries=extra, seed=ctx.config.seed,
                                     include_documents=documents)
    return str(target)


def _mining_corpus(ctx: RunContext) -> str | None:
    """The run's corpus, where Stage II's negatives are mined when the recipe or its config folder asks
    (the e5 preset does); None for a run without one (mining asked for explicitly then fails by name)."""
    try:
        return str(corpus_file(ctx))
    except CareError:
        return None


def evaluation_spec(model: str, stage_dir: str | Path) -> str:
    """The model spec a folder written by a recipe stage is evaluated, timed and indexed with: as it was
    trained (:func:`care.train.recipes.recipe.stage_model_spec`)."""
    from care.train.recipes.recipe import stage_model_spec

    return stage_model_spec(model, stage_dir)


def step_train_care(ctx: RunContext) -> dict[str, Any]:
    """CARE's recipe (and its ablations); returns the row label -> model spec of each stage's model
    (:func:`evaluation_spec`)."""
    from care.train.recipes.plan import RECIPE_STAGES, RecipeConfig, RecipePaths, RecipePlan
    from care.train.recipes.recipe import final_care_model, run_recipe

    recipe = ctx.config.recipes.care
    train_file = str(ctx.require(ctx.train_file, "label"))
    query, document = base_towers(ctx)
    out = ctx.model_dir(CARE_FOLDER)
    settings = care_settings(ctx)
    from care.train.engine.static_query import is_static_folder

    alignment = care_alignment_file(ctx, train_file, out, static=is_static_folder(query))
    corpus = _mining_corpus(ctx)
    validation = ctx.validation_task  # carved by the label step: the recipe scores its stages on it
    checked = {"validation_task": str(validation) if validation else None,
               "cache_dir": str(ctx.cache_dir(EMBEDDINGS_CACHE)),  # shared with the evaluate step
               "validation_instruction": evaluated_tasks(ctx)[VALIDATION_TASK].instruction if validation else None}
    no_carving = replace(ctx.config.validation, enabled=validation is not None)  # the label step held out the rows
    plan = RecipePlan(RecipePaths(query, document, train_file, str(out), alignment_file=alignment, corpus_file=corpus,
                                  **checked), recipe.config_dir, settings,
                      stages=RECIPE_STAGES if recipe.stages is None else tuple(recipe.stages),
                      recipe=RecipeConfig(mine_negatives=recipe.mine_negatives, static_tower=recipe.static_tower),
                      validation=no_carving)
    results = run_recipe(plan)
    # Stage I ends with its ranking part where the stage configs ship one (the e5 preset); a stage not trained
    # (recipes.care.stages) has no row
    stage1 = results.get("stage1_rank") or results.get("stage1")
    folders = {"init_query": (results["init_query"].query_model, results["init_query"]) if "init_query" in results
               else None,
               "init_document": (results["init_document"].document_model, results["init_document"])
               if "init_document" in results else None,
               "stage1": (stage1.care_model, stage1) if stage1 else None,
               "stage2": (results["stage2"].care_model, results["stage2"]) if "stage2" in results else None}
    models = {recipe.labels.get(stage, stage): evaluation_spec(wired[0], wired[1].output_dir)
              for stage, wired in folders.items() if wired and wired[0]}
    for label, switches in recipe.ablations.items():
        target = out / ABLATIONS_FOLDER / "".join(c if c.isalnum() else "_" for c in label)
        shares = not (switches.skip_query_init or switches.skip_document_init or switches.pretrained_query_model)
        if shares:
            target.mkdir(parents=True, exist_ok=True)
            _share_initialisations(out, target)
        if switches.mine_negatives is None:  # an ablation differs only in its switches: it mines as the recipe does
            switches = replace(switches, mine_negatives=recipe.mine_negatives)
        if switches.static_tower == RecipeConfig().static_tower:  # and trains a static tower as the recipe does
            switches = replace(switches, static_tower=recipe.static_tower)
        ablated = run_recipe(replace(plan.with_paths(output_dir=str(target)), recipe=switches))
        last = ablated[list(ablated)[-1]]
        models[label] = evaluation_spec(final_care_model(ablated) or last.query_model, last.output_dir)
    checks = _validation_summary(out, recipe.labels)
    return {"models": models, "stages": {stage: {"steps": r.global_step, "final_loss": r.final_loss}
                                         for stage, r in results.items()}, **checks}


def check_labels(stages: Iterable[str], labels: dict[str, str]) -> dict[str, str]:
    """The row labels of the recipe's validation checks: as the evaluation names its rows, where Stage I's row
    is its last model — the ranking part (``stage1_rank``) when the stage configs ship one — and the alignment
    before it is :data:`STAGE1_ALIGNMENT_LABEL`."""
    names = dict(labels)
    if "stage1_rank" in stages and "stage1" in names:
        names["stage1_rank"] = names.pop("stage1")
        names["stage1"] = STAGE1_ALIGNMENT_LABEL
    return names


def _validation_summary(out: Path, labels: dict[str, str]) -> dict[str, Any]:
    """The recipe's validation record as step outputs (each stage's score, fidelity and change from its start),
    logged on the terminal: ``{}`` when the recipe ran without validation."""
    from care.train.recipes.recipe import read_validation

    record = read_validation(out)
    if not record:
        return {}
    labels = check_labels(record["models"], labels)
    stages = {}
    for stage, row in record["models"].items():
        stages[labels.get(stage, stage)] = {"ndcg_at_10": row["scores"].get("ndcg_at_10"), "fidelity": row["fidelity"],
                                            "started_from": labels.get(row["started_from"], row["started_from"]),
                                            "delta": row["delta"], "flagged": row["flagged"]}
        fidelity = f", fidelity {row['fidelity']:.3f}" if row["fidelity"] is not None else ""
        change = (f" ({row['delta']:+.4f} vs {stages[labels.get(stage, stage)]['started_from']})"
                  if row["delta"] is not None else "")
        log = logger.warning if row["flagged"] else logger.info
        log("train_care: validation nDCG@10 of %s: %.4f%s%s%s", labels.get(stage, stage),
            row["scores"].get("ndcg_at_10"), change, fidelity, " — WORSE than the stage it started from" if
            row["flagged"] else "")
    return {"validation": stages}


def student_config(ctx: RunContext):
    """The run's student recipe: ``recipes.student.settings`` with the run's teacher, seed and progress bars."""
    settings = ctx.config.recipes.student.settings
    return type(settings).from_dict({**settings.to_dict(), "teacher": ctx.config.models.teacher,
                                     "seed": ctx.config.seed, "progress_bar": bool(ctx.config.show_progress)},
                                    source="recipes.student.settings")


def step_train_student(ctx: RunContext) -> dict[str, Any]:
    """The student against ``models.teacher`` (and its symmetric baseline); returns their model folders."""
    from care.train.recipes.student import (
        STAGE1_FOLDER,
        StudentPaths,
        tower_model_spec,
        train_student,
        train_symmetric_baseline,
    )

    recipe = ctx.config.recipes.student
    config = student_config(ctx)
    out = ctx.model_dir(STUDENT_FOLDER)
    corpus = str(corpus_file(ctx)) if config.stage1.sentence_source == "corpus" else None
    paths = StudentPaths(str(ctx.require(ctx.train_file, "label")), str(out), corpus, str(ctx.cache_dir("teacher")))
    models: dict[str, str] = {}
    summary: dict[str, Any] = {}
    if recipe.enabled:
        teacher = ctx.shared_encoder(config.teacher)  # shares its memo with curation and evaluation
        result = train_student(config, paths, teacher=teacher)
        ctx.save_memo()
        if recipe.stage1_label and config.stage1.enabled:
            models[recipe.stage1_label] = f"asym:{tower_model_spec(config, out / STAGE1_FOLDER / 'query')}|{config.teacher}"
        models[recipe.label] = result.model
        summary["student"] = result.summary()
    if recipe.symmetric:
        symmetric = train_symmetric_baseline(config, paths)
        models[recipe.symmetric_label] = symmetric.model
        summary["symmetric"] = symmetric.summary()
    return {"models": models, **summary}


def step_train_baselines(ctx: RunContext) -> dict[str, Any]:
    """The paper's baselines on CARE's trained document tower (or ``models.document``); returns their models."""
    from care.train.recipes.baselines import BaselinePaths, run_baseline

    train_file = str(ctx.require(ctx.train_file, "label"))
    query, document = base_towers(ctx)
    trained = ctx.step_outputs("train_care").get("models", {})
    init_document = ctx.config.recipes.care.labels.get("init_document", "init_document")
    document_trained = init_document in trained
    models, steps = {}, {}
    for name, baseline in ctx.config.recipes.baselines.items():
        paths = BaselinePaths(trained.get(init_document, document), train_file,
                              str(ctx.model_dir(BASELINES_FOLDER, name)), query, document_trained)
        result = run_baseline(name, paths, parse_settings(baseline.overrides, source=f"recipes.baselines.{name}.overrides: item"),
                              config_dir=baseline.config_dir)
        models[baseline.label or name] = result.model
        steps[name] = {step: {"steps": r.global_step, "final_loss": r.final_loss} for step, r in result.steps.items()}
    return {"models": models, "baselines": steps}
