"""run_baseline: each paper baseline runs its steps in order on tiny models, resumably."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from sentence_transformers import SentenceTransformer
from transformers import AutoConfig

from care.errors import CareError
from care.train.engine.config import ConfigError, load_config
from care.train.recipes.baselines import BASELINES, BaselinePaths
from care.train.stage_settings import StageSetting

from .plans import run_baseline_items

CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "baselines"
FAST = ["optim.batch_size=8", "optim.max_steps=2", "runtime.log_with=null", "runtime.progress_bar=false",
        "model.query_max_seq_length=32", "model.document_max_seq_length=32", "data.n_negatives=1",
        "optim.warmup_ratio=0", "checkpoint.every_steps=1",
        "runtime.log_every_steps=1"]


@pytest.fixture(scope="module")
def kale(tiny_dir, tmp_path_factory):
    """KALE run from scratch (init_document -> prune -> align); its document tower is shared below."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("kale")
    paths = BaselinePaths(str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"), str(out))
    return paths, run_baseline_items("kale", paths, FAST, config_dir=CONFIGS / "kale")


def _shared(tiny_dir, kale, out, **kw) -> BaselinePaths:
    return BaselinePaths(kale[1].document_model, str(tiny_dir / "train.jsonl"), str(out), document_trained=True, **kw)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_baseline_configs_match_their_steps(path):
    if path.parent.name == "st_mnrl":  # sentence-transformers' trainer: its own config (tests/train/test_st_mnrl.py)
        from care.train.recipes.st_mnrl import StMnrlConfig

        assert path.stem == "train" and StMnrlConfig.load(path) == StMnrlConfig()
        return
    step = {s.name: s for s in BASELINES[path.parent.name]}[path.stem]
    if step.stage == "prune":
        assert isinstance(yaml.safe_load(path.read_text())["layers"], int)
    else:
        assert load_config(path).stage == step.stage


def test_kale_runs_prunes_aligns_and_resumes(tiny_dir, kale, monkeypatch):
    paths, result = kale
    out = Path(paths.output_dir)
    assert list(result.steps) == ["init_document", "align"]
    assert result.document_model == str(out / "init_document" / "document")
    assert AutoConfig.from_pretrained(result.pruned_model).num_hidden_layers == 1  # prune.yaml: layers 1
    assert result.model == str(out / "align" / "model")
    care = SentenceTransformer(result.model, device="cpu")
    assert care.encode_query(["头痛"]).shape == care.encode_document(["头痛"]).shape == (1, 128)
    align_cfg = yaml.safe_load((out / "align" / "train_config.yaml").read_text())
    assert align_cfg["model"]["query_model"] == result.pruned_model
    assert align_cfg["model"]["document_model"] == result.document_model

    def no_training(*args, **kwargs):
        raise AssertionError("a finished step ran again")

    monkeypatch.setattr("care.train.recipes.baselines.train", no_training)
    monkeypatch.setattr("care.models.prune.prune_layers", no_training)
    again = run_baseline_items("kale", paths, FAST, config_dir=CONFIGS / "kale")
    assert again.model == result.model and again.steps["align"].global_step == 2
    with pytest.raises(CareError, match="other settings"):
        run_baseline_items("wang_lyu", paths, FAST, config_dir=CONFIGS / "wang_lyu")
    with pytest.raises(CareError, match=r"other settings \(settings"):  # --set changes are refused too
        run_baseline_items("kale", paths, [*FAST, "prune:layers=2"], config_dir=CONFIGS / "kale")
    from care.train.recipes.baselines import SETTINGS_FILE

    (out / SETTINGS_FILE).unlink()  # without the run record, the pruned folder's own record still guards it
    with pytest.raises(CareError, match="was pruned with"):
        run_baseline_items("kale", paths, [*FAST, "prune:layers=2"], config_dir=CONFIGS / "kale")


def test_interrupted_step_resumes_from_its_checkpoint(tiny_dir, kale, tmp_path):
    """A crash inside the last step: the rerun resumes it from its checkpoint, earlier steps are skipped."""
    from care.train.engine.checkpoint import list_checkpoints

    paths = _shared(tiny_dir, kale, tmp_path / "wl")
    overrides = [*FAST, "optim.max_steps=3"]

    class Crash(Exception):
        pass

    import care.train.engine.trainer as trainer_module

    real_fire = trainer_module.Trainer._fire

    def crash_after_step_2(self, event):
        real_fire(self, event)
        if event == "checkpoint" and self.state.global_step == 2:
            raise Crash

    trainer_module.Trainer._fire = crash_after_step_2
    try:
        with pytest.raises(Crash):
            run_baseline_items("wang_lyu", paths, overrides, config_dir=CONFIGS / "wang_lyu")
    finally:
        trainer_module.Trainer._fire = real_fire
    assert [c.name for c in list_checkpoints(tmp_path / "wl" / "distill")][-1] == "step-2"
    result = run_baseline_items("wang_lyu", paths, overrides, config_dir=CONFIGS / "wang_lyu")
    assert result.steps["distill"].global_step == 3
    assert "init_document" not in result.steps  # shared, already-trained document tower
    lines = (tmp_path / "wl" / "distill" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3  # no step logged twice


def test_scalingnote_distills_a_small_encoder_then_finetunes(tiny_dir, kale, tmp_path):
    torch.set_num_threads(1)
    paths = _shared(tiny_dir, kale, tmp_path / "sn", query_model=str(tiny_dir / "tiny-bert"))
    result = run_baseline_items("scalingnote", paths, FAST, config_dir=CONFIGS / "scalingnote")
    assert list(result.steps) == ["distill", "finetune"] and result.pruned_model is None
    finetune_cfg = yaml.safe_load((tmp_path / "sn" / "finetune" / "train_config.yaml").read_text())
    assert finetune_cfg["model"]["query_model"] == result.steps["distill"].query_model
    care = SentenceTransformer(result.model, device="cpu")  # tiny BERT query + document tower cut to 64
    assert care.encode_query(["头痛"]).shape == care.encode_document(["头痛"]).shape == (1, 64)


def test_score_distill_gives_a_symmetric_student_with_builtin_defaults(tiny_dir, kale, tmp_path):
    torch.set_num_threads(1)
    paths = _shared(tiny_dir, kale, tmp_path / "sd", query_model=str(tiny_dir / "tiny-bert"))
    result = run_baseline_items("score_distill", paths, FAST)  # no config folder: built-in defaults
    assert result.model == str(tmp_path / "sd" / "distill" / "query")
    cfg = yaml.safe_load((tmp_path / "sd" / "distill" / "train_config.yaml").read_text())
    assert cfg["loss"]["temperature"] == 0.02 and cfg["model"]["truncate_to_query_width"] is False
    assert SentenceTransformer(result.model, device="cpu").encode(["头痛"]).shape == (1, 64)


def test_bad_requests_are_rejected(tiny_dir, tmp_path):
    paths = BaselinePaths(str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"), str(tmp_path / "x"))
    with pytest.raises(ConfigError, match="unknown baseline 'kalee'"):
        run_baseline_items("kalee", paths)
    with pytest.raises(ConfigError, match="query_model"):
        run_baseline_items("scalingnote", paths)
    bad = tmp_path / "cfg"
    bad.mkdir()
    (bad / "init_document.yaml").write_text("stage: stage2\n")
    with pytest.raises(ConfigError, match="does not match step"):
        run_baseline_items("kale", paths, config_dir=bad)


def test_cli_baseline_command(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from care.cli import app
    from care.train.recipes.baselines import BaselineResult

    captured = {}

    def fake(name, paths, settings=(), *, config_dir=None):
        captured.update(name=name, paths=paths, settings=list(settings), config_dir=config_dir)
        return BaselineResult(name, paths.output_dir, "OUT/model", paths.document_model)

    monkeypatch.setattr("care.train.recipes.baselines.run_baseline", fake)
    result = CliRunner().invoke(app, ["train", "baseline", "scalingnote", "--document-model", "d", "--train", "t.jsonl",
                                      "-o", str(tmp_path), "--query-model", "q", "--document-trained",
                                      "--set", "finetune:optim.lr=1e-4"])
    assert result.exit_code == 0, result.output
    assert captured["paths"] == BaselinePaths("d", "t.jsonl", str(tmp_path), "q", True)
    assert captured["settings"] == [StageSetting("optim.lr", "1e-4", "finetune")] and "evaluate OUT/model" in result.output


def test_a_step_stage_override_swaps_the_objective(tiny_dir, kale, tmp_path):
    """docs/baselines.md: ScalingNote with the embedding MSE instead of the KL (`distill:stage=embed_distill`)."""
    torch.set_num_threads(1)
    paths = _shared(tiny_dir, kale, tmp_path / "sn_mse", query_model=str(tiny_dir / "tiny-bert"))
    result = run_baseline_items("scalingnote", paths, [*FAST, "optim.max_steps=1", "distill:stage=embed_distill"],
                          config_dir=CONFIGS / "scalingnote")
    assert result.steps["distill"].stage == "embed_distill" and result.steps["finetune"].stage == "stage1_sft"
