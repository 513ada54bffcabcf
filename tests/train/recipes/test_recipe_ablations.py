"""Recipe ablation switches: stage skipping and rewiring, Stage I data, zeroed loss terms, CLI."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from care.errors import CareError
from care.train.engine.config import ConfigError, TrainConfig
from care.train.engine.trainer import TrainResult, train
from care.train.recipes.recipe import RecipeConfig, RecipePaths, final_care_model, load_recipe_config
from care.train.stage_settings import StageSetting, parse_settings

from ..trainer_fixtures import alignment_rows, tiny_config_dict
from .plans import run_plan

ABLATIONS = Path(__file__).resolve().parents[3] / "configs" / "ablations"
FAST = ["optim.batch_size=8", "optim.max_steps=2", "runtime.cpu=true", "runtime.log_with=null",
        "runtime.progress_bar=false", "model.query_max_seq_length=32", "model.document_max_seq_length=32",
        "model.lora.r=4", "model.lora.alpha=8", "data.n_negatives=1", "optim.warmup_ratio=0"]


@pytest.fixture()
def calls(monkeypatch):
    """Replace training with a recorder of (stage, query model, document model, train file)."""
    seen: list[tuple] = []

    def fake_train(config: TrainConfig, resume: bool = False):
        m = config.model
        seen.append((config.stage, m.query_model, m.document_model, config.data.train_file, config.loss, config.data))
        return TrainResult(config.stage, config.output_dir, 1, 0.0)

    monkeypatch.setattr("care.train.recipes.recipe.train", fake_train)
    return seen


def _paths(tiny_dir: Path, out: Path) -> RecipePaths:
    return RecipePaths(str(tiny_dir / "tiny-bert"), str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"),
                       str(out), alignment_file=str(tiny_dir / "alignment.jsonl"))


def _wiring(calls) -> dict[str, tuple]:
    return {stage: rest[:3] for stage, *rest in calls}


def test_full_recipe_wiring(tiny_dir, tmp_path, calls):
    run_plan(_paths(tiny_dir, tmp_path), overrides=FAST)
    w, q = _wiring(calls), str(tiny_dir / "tiny-bert")
    assert list(w) == ["init_query", "init_document", "stage1", "stage2"]
    assert w["init_query"][0] == q
    assert w["stage1"] == [str(tmp_path / "init_query/query"), str(tmp_path / "init_document/document"),
                           str(tiny_dir / "alignment.jsonl")]
    assert w["stage2"] == [str(tmp_path / "stage1/query"), str(tmp_path / "init_document/document"),
                           str(tiny_dir / "train.jsonl")]
    recorded = {k: v for k, v in RecipeConfig().to_dict().items() if k != "static_tower"}  # a static tower's only
    assert json.loads((tmp_path / "recipe.json").read_text())["recipe"] == recorded


@pytest.mark.parametrize("switches, expected", [
    ({"skip_query_init": True}, {"stage1": ("BASE_Q", "INIT_D", "ALIGN"), "stage2": ("S1_Q", "INIT_D", "TRAIN")}),
    ({"skip_document_init": True}, {"stage1": ("INIT_Q", "BASE_D", "ALIGN"), "stage2": ("S1_Q", "BASE_D", "TRAIN")}),
    ({"skip_stage1": True}, {"stage2": ("INIT_Q", "INIT_D", "TRAIN")}),
    ({"skip_stage2": True}, {"stage1": ("INIT_Q", "INIT_D", "ALIGN")}),
    ({"stage1_data": "finetune"}, {"stage1": ("INIT_Q", "INIT_D", "TRAIN")}),
    ({"pretrained_query_model": "PRE"}, {"init_query": ("PRE", None, "TRAIN")}),
    ({"pretrained_query_model": "PRE", "skip_query_init": True}, {"stage1": ("PRE", "INIT_D", "ALIGN")}),
])
def test_ablation_switches_rewire_the_stages(tiny_dir, tmp_path, calls, switches, expected):
    names = {"BASE_Q": str(tiny_dir / "tiny-bert"), "BASE_D": str(tiny_dir / "tiny-qwen3"),
             "INIT_Q": str(tmp_path / "init_query/query"), "INIT_D": str(tmp_path / "init_document/document"),
             "S1_Q": str(tmp_path / "stage1/query"), "ALIGN": str(tiny_dir / "alignment.jsonl"),
             "TRAIN": str(tiny_dir / "train.jsonl"), "PRE": str(tmp_path / "retromae"), None: None}
    if "pretrained_query_model" in switches:
        switches = {**switches, "pretrained_query_model": names["PRE"]}
    recipe = RecipeConfig(**switches)
    run_plan(_paths(tiny_dir, tmp_path), overrides=FAST, recipe=recipe)
    wiring = _wiring(calls)
    assert not recipe.skipped() & set(wiring)
    for stage, (q, d, f) in expected.items():
        got = wiring[stage]
        assert got[0] == names[q] and got[2] == names[f], (stage, got)
        if stage != "init_query":
            assert got[1] == names[d], (stage, got)


def test_bad_switches_rejected(tiny_dir, tmp_path, calls):
    with pytest.raises(ConfigError, match="stage1_data"):
        RecipeConfig(stage1_data="sft")
    with pytest.raises(ConfigError, match="unknown recipe stage"):
        run_plan(_paths(tiny_dir, tmp_path), stages=["stage3"])


def test_real_ablation_run_resumes_and_refuses_other_settings(tiny_dir, tmp_path, monkeypatch):
    """w/o document init, Stage I on fine-tuning data, w/o Stage II: trains for real, then reruns as no-ops."""
    torch.set_num_threads(1)
    recipe = RecipeConfig(skip_document_init=True, skip_stage2=True, stage1_data="finetune")
    results = run_plan(_paths(tiny_dir, tmp_path), overrides=FAST, recipe=recipe)
    assert list(results) == ["init_query", "stage1"]
    assert final_care_model(results) == str(tmp_path / "stage1" / "model")
    stage1_config = yaml.safe_load((tmp_path / "stage1/train_config.yaml").read_text())
    assert stage1_config["data"]["train_file"] == str(tiny_dir / "train.jsonl")
    assert stage1_config["model"]["document_model"] == str(tiny_dir / "tiny-qwen3")

    def no_training(*args, **kwargs):
        raise AssertionError("a finished stage was trained again")

    monkeypatch.setattr("care.train.recipes.recipe.train", no_training)
    again = run_plan(_paths(tiny_dir, tmp_path), overrides=FAST, recipe=recipe)
    assert {s: r.global_step for s, r in again.items()} == {s: r.global_step for s, r in results.items()}
    with pytest.raises(CareError, match="other settings.*recipe"):
        run_plan(_paths(tiny_dir, tmp_path), overrides=FAST, recipe=RecipeConfig(skip_stage2=True))
    with pytest.raises(CareError, match=r"other settings \(settings"):
        run_plan(_paths(tiny_dir, tmp_path), overrides=[*FAST, "stage1:optim.lr=1e-5"], recipe=recipe)
    # reporting-only settings and the cache location may change on a rerun
    run_plan(_paths(tiny_dir, tmp_path), overrides=[*FAST, "runtime.progress_bar=true", "stage1:runtime.log_with=null",
                                                      f"stage1:model.teacher.cache_dir={tmp_path / 'shared_cache'}"],
               recipe=recipe)


@pytest.mark.parametrize("zeroed, kept, module", [("lambda_mse", "contrastive", "EmbeddingMSELoss"),
                                                  ("lambda_contrastive", "mse", "AsymInfoNCELoss")])
def test_stage1_with_a_zeroed_term_trains_without_computing_it(tiny_dir, tmp_path, monkeypatch, zeroed, kept, module):
    torch.set_num_threads(1)
    import care.train.engine.losses as losses

    def boom(self, *args, **kwargs):
        raise AssertionError(f"{module} was computed although its weight is 0")

    monkeypatch.setattr(getattr(losses, module), "forward", boom)
    out = tmp_path / zeroed
    cfg = tiny_config_dict(tiny_dir, "stage1", out, loss={"temperature": 0.1, zeroed: 0.0},
                           optim={"max_steps": 3})
    result = train(TrainConfig.from_dict(cfg))
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(math.isfinite(x["loss"]) for x in lines)
    assert {k for k in lines[0] if k.startswith("loss/")} == {f"loss/{kept}"}
    assert lines[-1]["loss"] < lines[0]["loss"] and result.care_model


def test_cli_recipe_passes_the_switches(tiny_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from care.cli import app

    captured = {}

    def fake_run(plan):
        captured.update(paths=plan.paths, recipe=plan.recipe, settings=list(plan.settings), validation=plan.validation)
        return {}

    monkeypatch.setattr("care.train.recipes.recipe.run_recipe", fake_run)
    result = CliRunner().invoke(app, [
        "train", "recipe", "--query-model", "q", "--document-model", "d", "--train", "t.jsonl", "-o", str(tmp_path),
        "--skip-stage1", "--skip-document-init", "--stage1-data", "finetune", "--pretrained-query-model", "rmae",
        "--skip-stage1-rank", "--set", "stage1:loss.lambda_mse=0"])
    assert result.exit_code == 0, result.output
    assert captured["recipe"] == RecipeConfig(skip_document_init=True, skip_stage1=True, stage1_data="finetune",
                                              pretrained_query_model="rmae", skip_stage1_rank=True)
    assert captured["settings"] == [StageSetting("loss.lambda_mse", 0, "stage1")]  # parsed at the command line
    assert captured["validation"].enabled and captured["validation"].share == 0.05  # the safety net by default
    assert CliRunner().invoke(app, ["train", "recipe", "--query-model", "q", "--document-model", "d", "--train", "t.jsonl",
                                    "-o", str(tmp_path), "--no-validation"]).exit_code == 0
    assert not captured["validation"].enabled


@pytest.mark.parametrize("path", sorted(ABLATIONS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_ablation_configs_load(path):
    recipe = load_recipe_config(path)
    assert recipe != RecipeConfig()  # every file switches something


@pytest.mark.parametrize("name, zeroed", [("stage1_no_mse", "lambda_mse"), ("stage1_no_contrastive", "lambda_contrastive")])
def test_loss_ablation_files_zero_one_stage1_weight(tiny_dir, tmp_path, calls, name, zeroed):
    run_plan(_paths(tiny_dir, tmp_path), overrides=FAST, recipe=load_recipe_config(ABLATIONS / f"{name}.yaml"))
    losses = {stage: loss for stage, _, _, _, loss, _ in calls}
    assert getattr(losses["stage1"], zeroed) == 0.0
    assert losses["stage2"].lambda_mse == losses["stage2"].lambda_contrastive == 1.0  # other stages untouched
    assert json.loads((tmp_path / "recipe.json").read_text())["recipe"]["overrides"] == [f"stage1:loss.{zeroed}=0"]


def test_bad_recipe_files_are_rejected(tmp_path):
    (tmp_path / "a.yaml").write_text("skip_stage3: true\n")
    with pytest.raises(CareError, match="a.yaml.*skip_stage3"):
        load_recipe_config(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("skip_stage1: yes please\n")
    with pytest.raises(ConfigError, match="b.yaml.*skip_stage1.*true/false"):
        load_recipe_config(tmp_path / "b.yaml")
    (tmp_path / "c.yaml").write_text("overrides: [lambda_mse]\n")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_recipe_config(tmp_path / "c.yaml")


def test_cli_ablation_file_combines_with_flags(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from care.cli import app

    captured = {}
    monkeypatch.setattr("care.train.recipes.recipe.run_recipe",
                        lambda plan: captured.update(recipe=plan.recipe) or {})
    result = CliRunner().invoke(app, ["train", "recipe", "--query-model", "q", "--document-model", "d", "--train",
                                      "t.jsonl", "-o", str(tmp_path), "--ablation", str(ABLATIONS / "stage1_no_mse.yaml"),
                                      "--skip-stage2"])
    assert result.exit_code == 0, result.output
    assert captured["recipe"] == RecipeConfig(skip_stage2=True, overrides=["stage1:loss.lambda_mse=0"])


def _config_dir_with_rank(tiny_dir: Path, folder: Path) -> Path:
    """configs/care_tiny plus a stage1_rank.yaml: the opt-in ranking alignment after Stage I."""
    import shutil

    shutil.copytree(Path(__file__).resolve().parents[3] / "configs" / "care_tiny", folder)
    (folder / "stage1_rank.yaml").write_text(yaml.safe_dump(
        {"stage": "bank_distill", "output_dir": "x", "model": {"query_model": "q", "document_model": "d"},
         "data": {"train_file": "t.jsonl", "n_negatives": 0}, "loss": {"temperature": 0.05}}), encoding="utf-8")
    return folder


def test_stage1_rank_runs_only_where_the_config_folder_ships_it(tiny_dir, tmp_path, calls):
    run_plan(_paths(tiny_dir, tmp_path / "plain"), config_dir=Path(__file__).resolve().parents[3] / "configs" / "care_tiny",
               overrides=FAST)
    assert [c[0] for c in calls] == ["init_query", "init_document", "stage1", "stage2"]
    calls.clear()
    out = tmp_path / "rank"
    run_plan(_paths(tiny_dir, out), config_dir=_config_dir_with_rank(tiny_dir, tmp_path / "cfg"), overrides=FAST)
    w = _wiring(calls)
    assert [c[0] for c in calls] == ["init_query", "init_document", "stage1", "bank_distill", "stage2"]
    # the ranking part: Stage I's query-side rows as queries, the training file's documents as the bank
    assert w["bank_distill"] == [str(out / "stage1/query"), str(out / "init_document/document"), str(out / "rank_queries.jsonl")]
    rank_data = next(c[5] for c in calls if c[0] == "bank_distill")
    assert rank_data.bank_file == str(tiny_dir / "train.jsonl")
    expected = [r for r in alignment_rows() if r["type"] == "query_align"]
    assert [json.loads(line)["query"] for line in (out / "rank_queries.jsonl").read_text().splitlines()] == \
        [r["query"] for r in expected]
    assert w["stage2"][0] == str(out / "stage1_rank/query")  # Stage II starts from the ranked query tower
    rank_loss = next(c[4] for c in calls if c[0] == "bank_distill")
    assert rank_loss.temperature == 0.05  # the folder's file, not the declared defaults
    calls.clear()
    run_plan(_paths(tiny_dir, tmp_path / "off"), config_dir=tmp_path / "cfg", overrides=FAST,
               recipe=RecipeConfig(skip_stage1_rank=True))
    assert [c[0] for c in calls] == ["init_query", "init_document", "stage1", "stage2"]
    calls.clear()
    run_plan(_paths(tiny_dir, tmp_path / "nos1"), config_dir=tmp_path / "cfg", overrides=FAST,
               recipe=RecipeConfig(skip_stage1=True))  # no Stage I: no part of it runs
    assert [c[0] for c in calls] == ["init_query", "init_document", "stage2"]
    calls.clear()
    run_plan(_paths(tiny_dir, tmp_path / "ft"), config_dir=tmp_path / "cfg", overrides=FAST,
               recipe=RecipeConfig(stage1_data="finetune"))  # Stage I on the train file: its queries are ranked
    assert _wiring(calls)["bank_distill"][2] == str(tiny_dir / "train.jsonl")


def test_the_ranking_part_needs_query_side_alignment_rows(tiny_dir, tmp_path, calls):
    from care.data.io import write_jsonl

    documents_only = write_jsonl(tmp_path / "docs_only.jsonl", [r for r in alignment_rows() if r["type"] == "doc_align"])
    paths = RecipePaths(str(tiny_dir / "tiny-bert"), str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"),
                        str(tmp_path / "out"), alignment_file=str(tmp_path / "docs_only.jsonl"))
    assert documents_only
    with pytest.raises(CareError, match=r"docs_only.jsonl: no query-side rows.*--skip-stage1-rank"):
        run_plan(paths, config_dir=_config_dir_with_rank(tiny_dir, tmp_path / "cfg"), overrides=FAST)


def test_the_ranking_part_trains_on_the_queries_an_override_names(tiny_dir, tmp_path, calls, caplog):
    """``stage1_rank:data.train_file`` replaces the derived rank_queries.jsonl: it is neither built nor needed."""
    from care.data.io import write_jsonl

    write_jsonl(tmp_path / "docs_only.jsonl", [r for r in alignment_rows() if r["type"] == "doc_align"])
    named = tmp_path / "mine.jsonl"
    assert write_jsonl(named, [r for r in alignment_rows() if r["type"] == "query_align"])
    out = tmp_path / "out"
    paths = RecipePaths(str(tiny_dir / "tiny-bert"), str(tiny_dir / "tiny-qwen3"), str(tiny_dir / "train.jsonl"),
                        str(out), alignment_file=str(tmp_path / "docs_only.jsonl"))
    with caplog.at_level("INFO", logger="care.train.recipes.recipe"):
        run_plan(paths, config_dir=_config_dir_with_rank(tiny_dir, tmp_path / "cfg"),
                   overrides=[*FAST, f"stage1_rank:data.train_file={named}"])
    assert _wiring(calls)["bank_distill"][2] == str(named)
    assert not (out / "rank_queries.jsonl").exists()
    assert "the ranking part's queries" not in caplog.text


def test_a_run_recorded_before_a_recipe_field_existed_is_still_resumable(tiny_dir, tmp_path, calls):
    run_plan(_paths(tiny_dir, tmp_path), overrides=FAST)
    record = tmp_path / "recipe.json"
    settings = json.loads(record.read_text())
    del settings["recipe"]["skip_stage1_rank"]  # as written by a version without the field
    record.write_text(json.dumps(settings))
    run_plan(_paths(tiny_dir, tmp_path), overrides=FAST)  # the new field at its default: same run
    with pytest.raises(CareError, match="other settings"):
        run_plan(_paths(tiny_dir, tmp_path), overrides=FAST, recipe=RecipeConfig(skip_stage2=True))


def test_a_finished_stage_trained_from_other_towers_is_refused_not_reused(tiny_dir, tmp_path, monkeypatch):
    """A stage added before a finished one (a preset gaining stage1_rank) must not leave Stage II
    trained from the old query tower: the rerun names the stage and both inputs."""
    from dataclasses import asdict

    from care.train.engine.trainer import CONFIG_FILE, RESULT_FILE

    def finishing_train(config: TrainConfig, resume: bool = False):
        out = Path(config.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        config.save(out / CONFIG_FILE)
        result = TrainResult(config.stage, config.output_dir, 1, 0.0)
        (out / RESULT_FILE).write_text(json.dumps(asdict(result)))
        return result

    monkeypatch.setattr("care.train.recipes.recipe.train", finishing_train)
    care_tiny = Path(__file__).resolve().parents[3] / "configs" / "care_tiny"
    run_plan(_paths(tiny_dir, tmp_path), config_dir=care_tiny, overrides=FAST)
    run_plan(_paths(tiny_dir, tmp_path), config_dir=care_tiny, overrides=FAST)  # same inputs: every stage reused
    with pytest.raises(CareError, match=r"finished stage2 trained with query_model=.*stage1/query.*now runs it with "
                                        r"query_model=.*stage1_rank/query"):
        run_plan(_paths(tiny_dir, tmp_path), config_dir=_config_dir_with_rank(tiny_dir, tmp_path / "cfg"),
                   overrides=FAST)
    # Stage II's objective changed (a preset moving to stage2_distill): refused too, naming both
    import shutil

    distill = shutil.copytree(care_tiny, tmp_path / "distill_cfg")
    (distill / "stage2.yaml").write_text((care_tiny / "stage2.yaml").read_text().replace("stage: stage2",
                                                                                       "stage: stage2_distill"))
    with pytest.raises(CareError, match=r"finished stage2 trained with stage=stage2; the recipe now runs it with "
                                        r"stage=stage2_distill"):
        run_plan(_paths(tiny_dir, tmp_path), config_dir=distill, overrides=FAST)


def test_stage2_trains_as_the_training_stage_its_file_or_an_override_names(tiny_dir, tmp_path, calls):
    import shutil

    from care.train.recipes.recipe import training_stage

    folder = tmp_path / "cfg"
    shutil.copytree(Path(__file__).resolve().parents[3] / "configs" / "care_tiny", folder)
    assert training_stage("stage2", folder, []) == "stage2"
    stage2 = yaml.safe_load((folder / "stage2.yaml").read_text())
    (folder / "stage2.yaml").write_text(yaml.safe_dump({**stage2, "stage": "stage2_distill"}))
    assert training_stage("stage2", folder, []) == "stage2_distill"
    assert training_stage("stage2", folder, parse_settings(["stage2:stage=stage2"])) == "stage2"  # an override wins
    (folder / "stage1.yaml").write_text((folder / "stage1.yaml").read_text().replace("stage: stage1", "stage: stage2"))
    assert training_stage("stage1", folder, []) == "stage1"  # a file copied from another stage changes nothing
    with pytest.raises(ConfigError, match=r"setting 'stage2:stage=kale_align'.*stage2, stage2_distill"):
        training_stage("stage2", folder, parse_settings(["stage2:stage=kale_align"]))
    run_plan(_paths(tiny_dir, tmp_path / "out"), config_dir=folder, overrides=FAST)
    assert [c[0] for c in calls] == ["init_query", "init_document", "stage1", "stage2_distill"]
    # the teacher of the distillation term (model.teacher.kind: document) is the tower Stage II starts from
    assert _wiring(calls)["stage2_distill"][1] == str(tmp_path / "out" / "init_document/document")


def test_cli_mining_flags_fill_the_recipe(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from care.cli import app

    captured = {}
    monkeypatch.setattr("care.train.recipes.recipe.run_recipe",
                        lambda plan: captured.update(recipe=plan.recipe) or {})
    base = ["train", "recipe", "--query-model", "q", "--document-model", "d", "--train", "t.jsonl", "-o", str(tmp_path),
            "--corpus", "c.jsonl"]
    result = CliRunner().invoke(app, [*base, "--mine-negatives", "2", "--mine-margin", "0.02", "--mine-depth", "300"])
    assert result.exit_code == 0, result.output
    assert captured["recipe"].mine_negatives == {"n_negatives": 2, "relative_margin": 0.02, "range_max": 300}
    result = CliRunner().invoke(app, [*base, "--mine-margin", "0.02"])
    assert result.exit_code != 0 and "--mine-negatives" in result.output
    (tmp_path / "mined.yaml").write_text("mine_negatives: {n_negatives: 3, range_max: 50}\n")
    result = CliRunner().invoke(app, [*base, "--ablation", str(tmp_path / "mined.yaml"), "--mine-margin", "0.01"])
    assert result.exit_code == 0, result.output
    assert captured["recipe"].mine_negatives == {"n_negatives": 3, "range_max": 50, "relative_margin": 0.01}


#: FAST for the e5 preset's stage2.yaml: its own negative count (the recipe wires the mined one) and no LoRA.
FAST_E5_STAGE2 = [o for o in FAST if not o.startswith(("data.n_negatives", "model.lora"))]


def _e5_stage2_folder(folder: Path) -> Path:
    """A config folder holding only the e5 preset's stage2.yaml (tests add their own recipe.yaml)."""
    from care.train.recipes.presets import preset_dir

    folder.mkdir()
    (folder / "stage2.yaml").write_text((preset_dir("e5") / "stage2.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def _corpus_of(tiny_dir: Path, path: Path) -> Path:
    """A corpus.jsonl of every positive and negative text of the tiny training file."""
    from care.testing.tiny_model import write_corpus

    rows = [json.loads(line) for line in (tiny_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = dict.fromkeys(p for r in rows for p in (*r["pos"], *r.get("neg", [])))
    return write_corpus(path, [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])


def test_stage2_trains_on_negatives_mined_by_the_initialised_tower(tiny_dir, tmp_path, calls):
    from care.train.recipes.model_negatives import mining_record

    rows = [json.loads(line) for line in (tiny_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    paths = replace(_paths(tiny_dir, tmp_path / "out"), corpus_file=str(_corpus_of(tiny_dir, tmp_path / "corpus.jsonl")))
    mining = {"n_negatives": 1, "relative_margin": None, "range_max": 5}
    fast = [o for o in FAST if not o.startswith("data.n_negatives")]
    run_plan(paths, overrides=fast, recipe=RecipeConfig(mine_negatives=mining), stages=["stage2"])
    (stage, _, document, train_file, _, data), = calls
    mined = [json.loads(line) for line in Path(train_file).read_text(encoding="utf-8").splitlines()]
    assert stage == "stage2" and document == str(tiny_dir / "tiny-qwen3")  # init_document not run: the base tower mines
    assert data.n_negatives == 1  # Stage II uses what was mined, not the stage config's own count
    assert len(mined) == len(rows) and all(len(r["neg"]) == 1 and r["neg"][0] not in r["pos"] for r in mined)
    assert json.loads(mining_record(train_file).read_text(encoding="utf-8"))["config"]["range_max"] == 5
    with pytest.raises(CareError, match="mine_negatives"):  # other mining settings in the same folder: refused
        run_plan(paths, overrides=fast, recipe=RecipeConfig(mine_negatives={**mining, "range_max": 4}),
                   stages=["stage2"])


def test_mined_negatives_are_used_with_the_e5_preset_whose_stage2_has_none(tiny_dir, tmp_path, calls):
    from care.train.recipes.presets import preset_dir

    assert yaml.safe_load((preset_dir("e5") / "stage2.yaml").read_text(encoding="utf-8"))["data"]["n_negatives"] == 0
    paths = replace(_paths(tiny_dir, tmp_path / "out"), corpus_file=str(_corpus_of(tiny_dir, tmp_path / "corpus.jsonl")))
    mining = {"n_negatives": 2, "relative_margin": None, "range_max": 5}
    fast = FAST_E5_STAGE2
    run_plan(paths, config_dir="preset:e5", overrides=fast, recipe=RecipeConfig(mine_negatives=mining), stages=["stage2"])
    run_plan(replace(paths, output_dir=str(tmp_path / "explicit")), config_dir="preset:e5",
               overrides=[*fast, "stage2:data.n_negatives=1"], recipe=RecipeConfig(mine_negatives=mining), stages=["stage2"])
    assert [c[5].n_negatives for c in calls] == [2, 1]  # the mined count; an explicit override still wins


def test_mining_without_a_corpus_fails_before_the_first_stage(tiny_dir, tmp_path, calls):
    recipe = RecipeConfig(mine_negatives={"n_negatives": 1})
    with pytest.raises(ConfigError, match="needs a corpus"):
        run_plan(_paths(tiny_dir, tmp_path / "a"), overrides=FAST, recipe=recipe)
    with pytest.raises(ConfigError, match="missing.jsonl does not exist"):
        run_plan(replace(_paths(tiny_dir, tmp_path / "b"), corpus_file=str(tmp_path / "missing.jsonl")),
                   overrides=FAST, recipe=recipe)
    assert calls == []  # nothing trained
    run_plan(_paths(tiny_dir, tmp_path / "c"), overrides=FAST, recipe=recipe, stages=["init_query"])  # no Stage II
    assert [c[0] for c in calls] == ["init_query"]


def test_the_e5_preset_mines_one_negative_by_default():
    from care.train.recipes.presets import folder_recipe_defaults, preset_dir

    assert folder_recipe_defaults(preset_dir("e5")) == {
        "mine_negatives": {"n_negatives": 1, "relative_margin": 0.02, "range_max": 300}}
    assert folder_recipe_defaults(None) == {} and folder_recipe_defaults(ABLATIONS) == {}  # no recipe.yaml: nothing


def test_a_config_folders_mining_applies_when_the_run_sets_none(tiny_dir, tmp_path, calls, caplog):
    folder = _e5_stage2_folder(tmp_path / "configs")
    (folder / "recipe.yaml").write_text("mine_negatives: {n_negatives: 2, relative_margin: null, range_max: 5}\n",
                                        encoding="utf-8")
    fast = FAST_E5_STAGE2
    corpus = str(_corpus_of(tiny_dir, tmp_path / "corpus.jsonl"))
    paths = replace(_paths(tiny_dir, tmp_path / "mined"), corpus_file=corpus)
    run_plan(paths, config_dir=folder, overrides=fast, stages=["stage2"])  # the folder's default: mined
    recorded = json.loads((tmp_path / "mined" / "recipe.json").read_text(encoding="utf-8"))["recipe"]
    assert recorded["mine_negatives"]["n_negatives"] == 2  # the effective recipe is recorded, not "unset"
    run_plan(replace(paths, output_dir=str(tmp_path / "off")), config_dir=folder, overrides=fast, stages=["stage2"],
               recipe=RecipeConfig(mine_negatives={"n_negatives": 0}))  # switched off by the run
    with caplog.at_level("WARNING", logger="care.train.recipes.recipe"):  # no corpus: warned, trained without mining
        run_plan(_paths(tiny_dir, tmp_path / "no_corpus"), config_dir=folder, overrides=fast, stages=["stage2"])
    assert "no corpus was given" in caplog.text and "--mine-negatives 0" in caplog.text
    (mined, _, _, mined_file, _, mined_data), (_, _, _, off_file, _, off_data), (_, _, _, plain_file, _, plain_data) = calls
    assert mined_file.endswith("stage2_train.jsonl") and mined_data.n_negatives == 2
    assert off_file == plain_file == str(tiny_dir / "train.jsonl") and off_data.n_negatives == plain_data.n_negatives == 0


def test_a_folder_trained_before_the_folder_mined_reruns_with_mining_off(tiny_dir, tmp_path, calls):
    """An older run (recorded without mining) is refused once its config folder mines by default, naming
    the way back; with mining switched off it is the same run."""
    folder = _e5_stage2_folder(tmp_path / "configs")
    fast = FAST_E5_STAGE2
    paths = replace(_paths(tiny_dir, tmp_path / "run"), corpus_file=str(_corpus_of(tiny_dir, tmp_path / "corpus.jsonl")))
    run_plan(paths, config_dir=folder, overrides=fast, stages=["stage2"])  # the folder has no recipe.yaml yet
    assert json.loads((tmp_path / "run" / "recipe.json").read_text(encoding="utf-8"))["recipe"]["mine_negatives"] is None
    (folder / "recipe.yaml").write_text("mine_negatives: {n_negatives: 1}\n", encoding="utf-8")
    with pytest.raises(CareError, match=r"other settings \(recipe.*--mine-negatives 0"):
        run_plan(paths, config_dir=folder, overrides=fast, stages=["stage2"])
    run_plan(paths, config_dir=folder, overrides=fast, stages=["stage2"],
               recipe=RecipeConfig(mine_negatives={"n_negatives": 0}))  # recorded as no mining, like the first run


def test_a_config_folders_recipe_file_is_checked(tmp_path):
    from care.train.recipes.presets import folder_recipe_defaults

    (tmp_path / "recipe.yaml").write_text("skip_stage1: true\n", encoding="utf-8")
    with pytest.raises(CareError, match="recipe.yaml may set mine_negatives only, not skip_stage1"):
        folder_recipe_defaults(tmp_path)
    (tmp_path / "recipe.yaml").write_text("mine_negatives: {n_negatives: 1, relative_margin: 3}\n", encoding="utf-8")
    with pytest.raises(CareError, match="recipe.yaml: mine_negatives.*relative_margin"):
        folder_recipe_defaults(tmp_path)


def test_stage2_with_the_document_tower_frozen_keeps_the_symmetric_tower(tiny_dir, tmp_path):
    """``stage2:stage=stage1_sft``: Stage II trains the query tower only, against the frozen fine-tuned
    document tower, so CARE's document tower is ``init_document``'s (a corpus index built with it stays valid)."""
    from care.models.asymmetric import load_care_model

    torch.set_num_threads(1)
    care_tiny = Path(__file__).resolve().parents[3] / "configs" / "care_tiny"
    out = tmp_path / "frozen"
    results = run_plan(_paths(tiny_dir, out), config_dir=care_tiny, overrides=[*FAST, "stage2:stage=stage1_sft"])
    assert list(results) == ["init_query", "init_document", "stage1", "stage2"]
    saved = yaml.safe_load((out / "stage2" / "train_config.yaml").read_text())
    assert saved["stage"] == "stage1_sft" and saved["model"]["document_model"] == str(out / "init_document/document")
    assert final_care_model(results) == str(out / "stage2" / "model")
    texts = ["多休息，多喝水", "头痛怎么办"]
    stage1, stage2 = (load_care_model(out / s / "model", device="cpu") for s in ("stage1", "stage2"))
    # both hold the frozen init_document tower; only the query tower moved in Stage II
    assert torch.equal(stage1.encode_document(texts, convert_to_tensor=True),
                       stage2.encode_document(texts, convert_to_tensor=True))
    assert not torch.allclose(stage1.encode_query(texts, convert_to_tensor=True),
                              stage2.encode_query(texts, convert_to_tensor=True))
