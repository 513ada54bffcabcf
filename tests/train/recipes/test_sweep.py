"""``care train sweep``: the variants train on the base's finished stages, are scored on the carved validation split
by the one cached scorer, the best is picked and reported, and a rerun trains and encodes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from care.config import ConfigError
from care.errors import CareError
from care.train.recipes.sweep import BASE, REPORT_JSON, REPORT_MARKDOWN, SweepConfig, changed_stages, run_sweep
from care.train.recipes.variants import parse_variant

from ..trainer_fixtures import write_rows

SWEEPS = Path(__file__).resolve().parents[3] / "configs" / "sweeps"
TOPICS = ["高血压", "糖尿病", "胃炎", "失眠", "咳嗽", "贫血", "痛风", "哮喘", "便秘", "湿疹", "头痛", "发烧", "腹泻", "鼻炎",
          "肺炎", "肝炎", "肾炎", "关节炎", "颈椎病", "腰痛", "牙痛", "中耳炎", "结膜炎", "荨麻疹", "带状疱疹", "甲亢",
          "冠心病", "心律失常", "骨折", "扁桃体炎"]
#: Both towers are one random-init tiny BERT (CLS pooling, no LoRA), so the untrained CARE model already ranks
#: an answer sharing the question's disease first; a lr of 1e-6 keeps that, a lr of 1e4 wrecks the towers.
FAST = ["optim.batch_size=8", "optim.max_steps=1", "runtime.cpu=true", "runtime.log_with=null",
        "runtime.progress_bar=false", "model.query_max_seq_length=32", "model.document_max_seq_length=32",
        "data.n_negatives=0", "optim.warmup_ratio=0", "model.lora=null", "model.document_pooling=cls",
        "optim.lr=1e-6", "model.query_prompt='问：'", "model.document_prompt='答：'"]


@pytest.fixture(scope="module")
def topics(tmp_path_factory) -> Path:
    """Tiny models over 30 question -> answer rows, each pair sharing its disease's characters."""
    from care.models.presets import make_tiny_models

    root = tmp_path_factory.mktemp("topics")
    rows = [{"query": f"{t}怎么办", "pos": [f"{t}患者应按时用药并定期复查"]} for t in TOPICS]
    make_tiny_models([text for row in rows for text in (row["query"], *row["pos"])], root)
    write_rows(root / "train.jsonl", rows)
    return root


def _config(root: Path, **fields) -> SweepConfig:
    data = {"query_model": str(root / "tiny-bert"), "document_model": str(root / "tiny-bert"),
            "train_file": str(root / "train.jsonl"), "overrides": [*FAST, "stage2:optim.lr=1e4"],  # a broken base
            "validation": {"share": 0.3, "min_queries": 5, "max_documents": None},
            "variants": {"calm": ["stage2:optim.lr=1e-6"], "hot": ["stage2:optim.lr=1e3"]}, **fields}
    return SweepConfig.from_dict(data)


def test_the_sweep_picks_the_best_variant_and_a_rerun_reuses_every_score(topics, tmp_path, monkeypatch):
    from care.train.recipes.validation import StageValidator

    torch.set_num_threads(1)
    out = tmp_path / "sweep"
    result = run_sweep(_config(topics), output_dir=out)
    main = {name: s.main for name, s in result.scores.items()}
    assert list(main) == [BASE, "calm", "hot"]
    assert result.best == "calm" and main["calm"] == max(main.values())
    assert main["calm"] > main[BASE] + 0.3  # the base's lr of 1e4 wrecked its Stage II; calm's did not
    assert result.best_model == result.scores["calm"].spec and "stage2/model" in result.best_model
    variant = out / "variants" / "calm"
    assert not (variant / "init_query").exists() and not (variant / "stage1").exists()  # the base's, reused
    stage2 = yaml.safe_load((variant / "stage2" / "train_config.yaml").read_text(encoding="utf-8"))
    assert stage2["model"]["query_model"] == str(out / BASE / "stage1" / "query") and stage2["optim"]["lr"] == 1e-6
    report = json.loads((out / REPORT_JSON).read_text(encoding="utf-8"))
    assert report["best"] == "calm" and report["rows"]["calm"]["items"] == ["stage2:optim.lr=1e-6"]
    assert report["rows"]["calm"]["ndcg_at_10_vs_base"] == pytest.approx(main["calm"] - main[BASE], abs=1e-4)
    assert {"init_query", "stage1", "stage2", "base document model"} <= set(report["base_rows"])
    (choice,) = report["selection"]  # the selection protocol's block: chosen on validation, every row's score
    assert choice["selected_on"] == "validation" and choice["chosen"] == "calm"
    assert choice["candidates"] == pytest.approx(main, abs=1e-4)
    assert "| **calm** (best) |" in (out / REPORT_MARKDOWN).read_text(encoding="utf-8")

    calls = {"evaluate": 0, "fidelity": 0}
    for name in calls:
        original = getattr(StageValidator, f"_{name}")

        def counted(self, spec, _name=name, _original=original):
            calls[_name] += 1
            return _original(self, spec)

        monkeypatch.setattr(StageValidator, f"_{name}", counted)

    def must_not_train(*args, **kwargs):
        raise AssertionError("a finished stage was trained again")

    monkeypatch.setattr("care.train.recipes.recipe.train", must_not_train)
    again = run_sweep(_config(topics), output_dir=out)
    assert calls == {"evaluate": 0, "fidelity": 0}  # every score read back by fingerprint: nothing encoded
    assert again.best == "calm" and {n: s.main for n, s in again.scores.items()} == main


def test_what_a_variant_changes_decides_what_it_reuses():
    assert changed_stages(parse_variant("a=stage2:optim.lr=1e-5")) == {"stage2"}
    assert changed_stages(parse_variant("a=stage2:mine=0")) == {"stage2"}
    assert changed_stages(parse_variant("a=stage1:loss.lambda_mse=0")) == {"stage1", "stage1_rank", "stage2"}
    assert changed_stages(parse_variant("a=recipe:skip_stage1=true")) == {"stage1", "stage1_rank", "stage2"}
    # init_document depends on no query tower: a change to init_query leaves it to the base
    assert changed_stages(parse_variant("a=init_query:optim.lr=1e-5")) == {"init_query", "stage1", "stage1_rank",
                                                                           "stage2"}
    assert "init_document" in changed_stages(parse_variant("a=optim.batch_size=8"))  # every stage
    assert changed_stages(parse_variant("a=")) == set()


def test_a_bad_sweep_config_names_the_field(topics, tmp_path):
    with pytest.raises(ConfigError, match="config field 'variants': variant 'x': item 'stage9:optim.lr=1': unknown "
                                          "stage 'stage9'"):
        _config(topics, variants={"x": ["stage9:optim.lr=1"]})
    with pytest.raises(ConfigError, match="config field 'metric': must be one of ndcg_at_10, recall_at_100"):
        _config(topics, metric="map")
    with pytest.raises(ConfigError, match="config field 'validation.enabled'"):
        _config(topics, validation={"enabled": False})
    with pytest.raises(ConfigError, match="config field 'variants': give at least one variant"):
        _config(topics, variants={})
    with pytest.raises(CareError, match="too few retrieval rows to hold out validation.min_queries \\(50\\)"):
        run_sweep(_config(topics, validation={"min_queries": 50}), output_dir=tmp_path / "small")


def test_the_shipped_sweep_config_loads():
    config = SweepConfig.load(SWEEPS / "e5_stage2.yaml")
    assert config.query_model == "e5?layers=6" and config.config_dir == "preset:e5"
    assert {v.name for v in config.parsed_variants()} == set(config.variants)


def test_the_command_runs_a_sweep_config(topics, tmp_path, monkeypatch):
    import typer

    from care.train.cli import register
    from care.train.recipes.sweep import SweepResult

    seen = {}

    def fake(config, *, output_dir=None):
        seen.update(variants=config.variants, share=config.validation.share, output=output_dir)
        (tmp_path / "sweep.md").write_text("| row |\n", encoding="utf-8")
        return SweepResult("calm", "m?x=1", {}, tmp_path / "sweep.json", tmp_path / "sweep.md")

    monkeypatch.setattr("care.train.recipes.sweep.run_sweep", fake)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(_config(topics).to_dict(), allow_unicode=True), encoding="utf-8")
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["train", "sweep", str(path), "-o", str(tmp_path / "o"),
                                   "--set", "validation.share=0.2"])
    assert res.exit_code == 0, res.output
    assert seen == {"variants": {"calm": ["stage2:optim.lr=1e-6"], "hot": ["stage2:optim.lr=1e3"]}, "share": 0.2,
                    "output": str(tmp_path / "o")}
    assert f"best: calm (m?x=1); report: {tmp_path / 'sweep.json'}" in res.output


def test_a_reused_stage_must_be_finished(topics, tmp_path):
    from care.train.recipes.recipe import RecipePaths

    from .plans import run_plan

    paths = RecipePaths(str(topics / "tiny-bert"), str(topics / "tiny-bert"), str(topics / "train.jsonl"),
                        str(tmp_path / "run"), finished_stages={"init_query": str(tmp_path / "nothing")})
    with pytest.raises(CareError, match=f"{tmp_path / 'nothing'}: not a finished init_query"):
        run_plan(paths, overrides=FAST)
    with pytest.raises(ConfigError, match="finished_stages: unknown recipe stage\\(s\\) \\['stage3'\\]"):
        run_plan(RecipePaths(paths.query_model, paths.document_model, paths.train_file, str(tmp_path / "r2"),
                               finished_stages={"stage3": str(tmp_path)}), overrides=FAST)


def test_a_recipe_folder_gets_the_bases_mined_file_once(tmp_path):
    """Stage II of a variant mines with the base's document tower and training file: the base's file (and its
    record) is copied, passes the recipe's reuse check, and a file already there is kept."""
    from care.data.io import write_json, write_jsonl
    from care.train.recipes.model_negatives import MiningConfig, is_mined_with, mining_record
    from care.train.recipes.recipe import MINED_FILE
    from care.train.recipes.sweep import share_mined_file

    base, variant = tmp_path / "base", tmp_path / "variant"
    assert share_mined_file(base, variant) is None  # nothing mined yet: the variant mines its own
    base.mkdir()
    write_jsonl(base / MINED_FILE, [{"query": "q", "pos": ["p"], "neg": ["n"]}])
    config = MiningConfig(n_negatives=1, relative_margin=0.02, query_prompt="query: ", document_prompt="passage: ")
    write_json(mining_record(base / MINED_FILE), {"config": config.to_dict(), "report": {"rows": 1}})
    copied = share_mined_file(base, variant)
    assert copied == variant / MINED_FILE and copied.read_bytes() == (base / MINED_FILE).read_bytes()
    assert is_mined_with(copied, config) and not is_mined_with(copied, MiningConfig(n_negatives=2))
    write_jsonl(copied, [{"query": "q2", "pos": ["p2"], "neg": ["n2"]}])  # mined there since: kept
    assert share_mined_file(base, variant) is None and "q2" in copied.read_text(encoding="utf-8")
