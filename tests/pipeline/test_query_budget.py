"""``recipes.care.query_speedup``: refused at config load unless the query tower is a tower spec of the document
model; in a run it hands CARE's recipe the cut the measured curve picks (with the richer Stage I at one layer,
where the user left those settings unset), records the choice, and stops before training when no cut is fast
enough."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from care.config import ConfigError
from care.pipeline.cli import demo_config_path
from care.pipeline.config import CareRecipeConfig, load_run_config
from care.pipeline.context import RunContext
from care.pipeline.query_budget import OUTPUT_KEY, report_lines, rich_stage1, with_query_budget
from care.pipeline.train import step_train_care
from care.train.recipes.budget_tower import QueryBudgetError

from .budget_run import E5_TOWERS, budget_context


@pytest.mark.parametrize(("overrides", "message"), [
    ([], r"config field 'recipes.care.query_speedup': a query-latency budget picks the query tower among the depth "
         r"cuts of the document model, so models.query must be a tower spec of models.document: models.query "
         r"e5\?layers=6 with models.document e5 \(got models.query 'tiny', models.document 'tiny'\)"),
    (["models.query=e5?layers=6"], r"got models.query 'e5\?layers=6', models.document 'tiny'"),
    (["models.query=e5?layers=3", "models.document=e5?layers=6"], r"models.document 'e5\?layers=6'"),
])
def test_a_budget_without_towers_it_can_cut_fails_when_the_config_loads(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_run_config(demo_config_path(tiny=True), [*overrides, "recipes.care.query_speedup=5"])


def test_a_budget_below_one_is_refused_and_a_good_one_loads() -> None:
    with pytest.raises(ConfigError, match=r"'recipes.care.query_speedup': must be at least 1 .*got 0.5"):
        load_run_config(demo_config_path(tiny=True), [*E5_TOWERS, "recipes.care.query_speedup=0.5"])
    config = load_run_config(demo_config_path(tiny=True), [*E5_TOWERS, "recipes.care.query_speedup=5"])
    assert config.recipes.care.query_speedup == 5.0
    assert load_run_config(demo_config_path(tiny=True)).recipes.care.query_speedup is None  # the default: no budget


LENGTHS = ["model.query_max_seq_length=128", "model.document_max_seq_length=128"]


def _rich(tmp_path: Path, recipe: CareRecipeConfig):
    """:func:`rich_stage1` on a run whose ``recipes.care`` is ``recipe``: ``(its recipe, the settings it adds as
    items, applied, kept)``."""
    config = load_run_config(demo_config_path(tiny=True))
    ctx = RunContext(replace(config, recipes=replace(config.recipes, care=recipe)), tmp_path / "run")
    budgeted, applied, kept = rich_stage1(ctx)
    assert ctx.recipe_settings == () and ctx.config.recipes.care is recipe  # the run's own context is untouched
    added = [f"{s.stage}:{s.key}={s.value}" if s.stage else f"{s.key}={s.value}" for s in budgeted.recipe_settings]
    assert budgeted.config.recipes.care.overrides == recipe.overrides  # the user's text is left as written
    return budgeted.config.recipes.care, added, applied, kept


def test_the_richer_stage_one_fills_only_what_the_user_left_unset(tmp_path) -> None:
    recipe, added, applied, kept = _rich(tmp_path, CareRecipeConfig(overrides=["stage2:optim.epochs=1"]))
    rich = [*LENGTHS, "stage1:optim.epochs=6", "stage1:optim.lr=0.0024", "stage1_rank:optim.epochs=3"]
    assert applied == {"recipes.care.alignment_sentences": 100_000, "recipes.care.alignment_sentence_max_chars": 150,
                       "recipes.care.alignment_sentence_titles": False, "recipes.care.alignment_documents": False,
                       "model.query_max_seq_length": 128, "model.document_max_seq_length": 128,
                       "stage1:optim.epochs": 6, "stage1:optim.lr": 2.4e-3, "stage1_rank:optim.epochs": 3}
    assert kept == [] and added == rich
    recipe, added, applied, kept = _rich(tmp_path, CareRecipeConfig(
        alignment_sentences=10_000, alignment_documents=True, overrides=["stage1:optim.epochs=2", "optim.lr=1e-4"]))
    assert (recipe.alignment_sentences, recipe.alignment_sentence_max_chars) == (10_000, 150)
    assert recipe.alignment_documents is True and recipe.alignment_sentence_titles is False
    assert added == [*LENGTHS, "stage1_rank:optim.epochs=3"]
    assert kept == ["recipes.care.alignment_sentences", "recipes.care.alignment_documents", "stage1 epochs",
                    "stage1 learning rate"]
    recipe, added, applied, kept = _rich(tmp_path, CareRecipeConfig(epochs=1, alignment_sentence_max_chars=80,
                                                                    query_max_length=64))
    assert added == ["model.document_max_seq_length=128", "stage1:optim.lr=0.0024"]
    assert kept == ["recipes.care.alignment_sentence_max_chars", "every stage query token limit", "stage1 epochs",
                    "stage1_rank epochs"]
    more = ["stage1_rank:optim.lr=1e-3", "stage2:model.document_max_seq_length=96"]
    recipe, added, applied, kept = _rich(tmp_path, CareRecipeConfig(lr=5e-5, overrides=more))
    assert added == ["model.query_max_seq_length=128", "stage1:optim.epochs=6", "stage1_rank:optim.epochs=3"]
    assert kept == ["every stage document token limit", "stage1 learning rate"]  # recipes.care.lr: every stage's


@pytest.fixture
def recipe_calls(monkeypatch, tmp_path):
    calls = []

    def run_recipe(plan):
        calls.append((plan.paths, [f"{s.stage}:{s.key}={s.value}" if s.stage else f"{s.key}={s.value}"
                                   for s in plan.all_settings]))
        return {s: SimpleNamespace(query_model="q", document_model="d", care_model="m", global_step=1, final_loss=0.0,
                                   output_dir=str(tmp_path / s))
                for s in ("init_query", "init_document", "stage1", "stage2")}

    monkeypatch.setattr("care.train.recipes.recipe.run_recipe", run_recipe)
    return calls


def test_the_picked_depth_reaches_the_recipe(tmp_path, curve, recipe_calls) -> None:
    from care.pipeline.run import STEPS

    assert inspect.unwrap(STEPS["train_care"]) is step_train_care  # care run trains CARE through the budget
    ctx = budget_context(tmp_path, 5)
    outputs = with_query_budget(step_train_care)(ctx)
    (paths, overrides), = recipe_calls
    query = Path(paths.query_model)
    assert query.name == "L1-strided" and json.loads((query / "config.json").read_text())["num_hidden_layers"] == 1
    assert Path(paths.document_model).name == "L12" and curve[0][0] == paths.document_model  # the curve of D's cuts
    assert len(curve[0][1]) == 20 and curve[0][2] == ctx.root / "cache" / "query_latency"
    assert {*LENGTHS, "stage1:optim.epochs=6", "stage1:optim.lr=0.0024", "stage1_rank:optim.epochs=3"} <= set(overrides)
    alignment = [json.loads(line) for line in Path(paths.alignment_file).read_text(encoding="utf-8").splitlines()]
    assert max(len(row["query"]) for row in alignment) > 60  # corpus sentences up to 150 characters
    assert {row["type"] for row in alignment} == {"query_align"}  # query-side rows only, as measured
    choice = outputs[OUTPUT_KEY]
    assert (choice["budget"], choice["depth"], choice["query_spec"], choice["rich_stage1"]) == \
        (5.0, 1, "e5?layers=1", True)
    assert choice["speedups"]["1"] == 6.416 and choice["settings"]["models.query"] == "e5?layers=1"
    assert choice["selection"][0]["selected_on"] == "speed"  # picked by measured speed, no quality score
    assert choice["settings"]["recipes.care.alignment_sentence_max_chars"] == 150 and choice["kept"] == []
    assert ctx.config.models.query == "e5?layers=6"  # the run's own config is left as the user wrote it
    lines = "\n".join(report_lines(choice))
    assert "Query tower for the query-latency budget of 5×: `e5?layers=1` (1 of 12 layers, 6.42× faster" in lines


def test_a_deeper_pick_trains_with_the_stage_settings_as_they_are(tmp_path, curve, recipe_calls) -> None:
    outputs = with_query_budget(step_train_care)(budget_context(tmp_path, 3))
    (paths, overrides), = recipe_calls
    assert Path(paths.query_model).name == "L3-strided" and paths.alignment_file is None
    assert not any(o.startswith("stage1") for o in overrides)
    assert outputs[OUTPUT_KEY]["settings"] == {"models.query": "e5?layers=3"}


def test_the_budget_times_the_cuts_as_the_config_says(tmp_path, curve, recipe_calls) -> None:
    with pytest.raises(ConfigError, match="'recipes.care.query_speedup_timing': must be one of interleaved, "
                                          "back_to_back, got 'warm'"):
        load_run_config(demo_config_path(tiny=True), [*E5_TOWERS, "recipes.care.query_speedup=5",
                                             "recipes.care.query_speedup_timing=warm"])
    with_query_budget(step_train_care)(budget_context(tmp_path, 2.5, "recipes.care.query_speedup_timing=back_to_back"))
    assert curve[0][3] == "back_to_back"
    with_query_budget(step_train_care)(budget_context(tmp_path / "b", 2.5))
    assert curve[1][3] == "interleaved"  # the default: the conservative figure


def test_a_budget_no_cut_meets_stops_before_training(tmp_path, curve, recipe_calls) -> None:
    with pytest.raises(QueryBudgetError, match=r"budget of 7×.*12: 1.00×.*1: 6.42×"):
        with_query_budget(step_train_care)(budget_context(tmp_path, 7))
    assert recipe_calls == []


def test_care_runs_budget_builds_stage_one_data_as_the_measured_kit_did(tmp_path) -> None:
    """The richer Stage I's data through ``care run`` is the measured runs' rule (``benchmarks/frontier_kit.py`` before
    it called the package: every sentence of 6-150 characters of the documents' *text*, query-side rows only)."""

    from care.data.retrieval import load_corpus
    from care.pipeline.train import care_alignment_file, corpus_file
    from care.train.recipes.alignment_data import alignment_from_training_file, document_sentences

    ctx = budget_context(tmp_path, 5)
    ctx, _, _ = rich_stage1(ctx)
    recipe = ctx.config.recipes.care
    built = Path(care_alignment_file(ctx, str(ctx.train_file), tmp_path / "built"))
    texts = [d.text for d in load_corpus(corpus_file(ctx)).values()]  # the kit's: text, no title
    sentences = document_sentences(texts, limit=None, seed=ctx.config.seed, max_chars=150)
    assert 0 < len(sentences) < recipe.alignment_sentences  # "every sentence": the cap does not bind here
    kit = tmp_path / "kit.jsonl"
    alignment_from_training_file(ctx.train_file, kit, seed=ctx.config.seed, extra_queries=sentences,
                                 include_documents=False)
    assert built.read_text(encoding="utf-8") == kit.read_text(encoding="utf-8")
