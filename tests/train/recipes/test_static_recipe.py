"""A static query tower (``e5?layers=0``'s kind: StaticEmbedding, a lookup) trained as CARE's query tower through the
recipe: Stage I at its own learning rate with IDF-initialised learned token weights, Stage II with the document
tower; the saved CARE folder reloads with plain sentence-transformers, its query route is the numpy lookup, every
stage is scored on validation (the benchmark's evaluation), and the run records depth 0."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from care.encoders.static import STATIC_DEPTH, StaticQueryEncoder
from care.errors import CareError
from care.train.recipes.plan import RecipeConfig, RecipePaths
from care.train.recipes.static_query import StaticTowerConfig, static_tower_settings
from care.train.recipes.validation import ValidationConfig
from care.train.stage_settings import StageSetting, for_stage

from ..trainer_fixtures import write_rows
from .plans import plan_of, run_plan

FAST = ["optim.batch_size=4", "optim.max_steps=3", "runtime.cpu=true", "runtime.log_with=null",
        "runtime.progress_bar=false", "model.query_max_seq_length=32", "model.document_max_seq_length=32",
        "model.lora=null", "data.n_negatives=0", "optim.warmup_ratio=0"]
TOPICS = ("高血压", "糖尿病", "胃炎", "失眠", "咳嗽", "贫血", "痛风", "哮喘", "便秘", "湿疹", "头痛", "发烧")
QUERIES = ["高血压怎么办", "糖尿病能吃水果吗", "失眠", ""]
TOLERANCE = 1e-5
STATIC_LR = 0.5


@pytest.fixture(scope="module")
def static_run(tiny_dir, tmp_path_factory):
    """The whole recipe (init_query, init_document, Stage I, Stage II) with a static query tower built from the tiny
    BERT's embeddings, validation on."""
    from care.models.static_tower import build_static_tower

    root = tmp_path_factory.mktemp("static_recipe")
    static = build_static_tower(tiny_dir / "tiny-bert", root / "static")
    train = write_rows(root / "train.jsonl", [{"query": f"{t}怎么办", "pos": [f"{t}的治疗和日常注意事项"]}
                                               for t in TOPICS])
    paths = RecipePaths(str(static), str(tiny_dir / "tiny-qwen3"), str(train), str(root / "out"))
    recipe = RecipeConfig(static_tower=StaticTowerConfig(lr=STATIC_LR, token_weights="idf", learn_weights=True))
    results = run_plan(paths, overrides=FAST, recipe=recipe,
                       validation=ValidationConfig(share=0.34, min_queries=3))
    return static, root / "out", results


def test_the_static_stages_train_at_their_own_rate_with_idf_weights(static_run) -> None:
    import yaml

    _, out, results = static_run
    assert list(results) == ["init_query", "init_document", "stage1", "stage2"]
    configs = {s: yaml.safe_load((out / s / "train_config.yaml").read_text(encoding="utf-8")) for s in results}
    assert configs["init_query"]["optim"]["lr"] == STATIC_LR and configs["stage1"]["optim"]["lr"] == STATIC_LR
    assert configs["stage2"]["optim"]["lr"] != STATIC_LR  # Stage II: its own (stage2_lr unset)
    assert configs["init_query"]["model"]["query_token_weights"] == "idf"  # the first static stage only
    assert configs["stage1"]["model"]["query_token_weights"] is None
    assert configs["stage1"]["model"]["learn_query_token_weights"] is True
    recorded = json.loads((out / "recipe.json").read_text(encoding="utf-8"))
    assert recorded["query_depth"] == STATIC_DEPTH == 0
    assert recorded["recipe"]["static_tower"]["lr"] == STATIC_LR


def test_each_stage_saves_a_plain_static_tower_that_moved(static_run) -> None:
    static, out, results = static_run
    before = StaticQueryEncoder(static)
    for stage in ("init_query", "stage1"):
        tower = StaticQueryEncoder(results[stage].query_model)
        assert tower.table.shape == before.table.shape
        assert not np.allclose(tower.table, before.table)  # trained
    modules = json.loads((Path(results["stage1"].query_model) / "modules.json").read_text(encoding="utf-8"))
    assert modules[0]["type"].startswith("sentence_transformers.") and modules[0]["type"].endswith(".StaticEmbedding")  # folded: no care class


def test_the_care_folder_reloads_and_its_query_route_is_the_lookup(static_run) -> None:
    from sentence_transformers import SentenceTransformer

    from care.encoders.sides import load_side

    _, _, results = static_run
    care = results["stage2"].care_model
    lookup = load_side(care, "query")
    assert isinstance(lookup, StaticQueryEncoder) and lookup.location.query_only
    plain = SentenceTransformer(care, device="cpu")  # no remote code: sentence-transformers' own modules
    prefixed = StaticQueryEncoder(care, query_prefix="q: ")
    np.testing.assert_allclose(prefixed.encode_queries(QUERIES), plain.encode_query(QUERIES, prompt="q: "),
                               atol=TOLERANCE)
    instruction = plain.prompts["query"].removeprefix("Instruct: ").removesuffix("\nQuery: ")
    np.testing.assert_allclose(lookup.encode_queries(QUERIES, instruction=instruction), plain.encode_query(QUERIES),
                               atol=TOLERANCE)  # the CARE folder's default: its retrieval instruction
    stage1 = StaticQueryEncoder(results["stage1"].query_model)
    assert not np.allclose(lookup.table, stage1.table)  # Stage II trained the static tower with the documents


def test_every_stage_is_scored_on_validation(static_run) -> None:
    _, out, _ = static_run
    scores = json.loads((out / "validation" / "scores.json").read_text(encoding="utf-8"))["models"]
    for label in ("base query model", "init_query", "stage1", "stage2"):
        assert 0 <= scores[label]["scores"]["ndcg_at_10"] <= 1
    assert scores["stage2"]["fidelity"] is not None


def test_settings_start_weights_once_and_user_settings_win() -> None:
    config = StaticTowerConfig(lr=0.05, token_weights="idf", learn_weights=False, stage2_lr=1e-3)
    settings = static_tower_settings(config, ("stage1", "stage1_rank", "stage2"))
    user = [StageSetting("optim.lr", 1e-4), StageSetting("optim.lr", 0.2, "stage1_rank")]
    stage1 = {s.key: s.value for s in for_stage([*settings, *user], "stage1")}
    rank = {s.key: s.value for s in for_stage([*settings, *user], "stage1_rank")}
    stage2 = {s.key: s.value for s in for_stage([*settings, *user], "stage2")}
    assert (stage1["optim.lr"], stage1["model.query_token_weights"]) == (0.05, "idf")
    assert rank["optim.lr"] == 0.2 and "model.query_token_weights" not in rank
    assert stage2["optim.lr"] == 1e-3
    assert static_tower_settings(StaticTowerConfig(), ("init_document", "stage2")) == []


@pytest.mark.parametrize(("field", "value", "message"), [
    ("lr", 0, "static_tower.lr"), ("token_weights", "bm25", "static_tower.token_weights"),
    ("stage2_lr", -1, "static_tower.stage2_lr")])
def test_bad_static_settings_name_the_field(field, value, message) -> None:
    with pytest.raises(CareError, match=message):
        RecipeConfig.from_dict({"static_tower": {field: value}})


def test_token_weights_on_a_transformer_tower_are_refused(tiny_dir, tmp_path) -> None:
    from care.train.recipes.recipe import run_recipe

    paths = RecipePaths(str(tiny_dir / "tiny-bert"), str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"),
                        str(tmp_path), alignment_file=str(tiny_dir / "alignment.jsonl"))
    plan = plan_of(paths, overrides=[*FAST, "stage1:model.learn_query_token_weights=true"], stages=("stage1",),
                   validation=ValidationConfig(enabled=False))
    with pytest.raises(CareError, match="not one"):
        run_recipe(plan)
