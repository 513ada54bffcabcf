"""`care train --config` and `care train recipe` run tiny configs end to end."""

from __future__ import annotations

import json

import torch
import yaml
from typer.testing import CliRunner

from care.train.engine.trainer import read_result

from .trainer_fixtures import tiny_config_dict


def _app():
    import typer

    from care.train.cli import register

    app = typer.Typer()
    register(app)
    return app


def test_train_from_yaml_with_overrides(tiny_dir, tmp_path):
    torch.set_num_threads(1)
    cfg = tiny_config_dict(tiny_dir, "stage2", tmp_path / "run")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    res = CliRunner().invoke(_app(), ["train", "--config", str(tmp_path / "c.yaml"),
                                      "--set", "optim.max_steps=2", "--set", "optim.lr=5e-4"])
    assert res.exit_code == 0, res.output
    assert "stage2: 2 steps" in res.output
    result = read_result(tmp_path / "run")
    assert result.global_step == 2 and result.care_model
    saved = yaml.safe_load((tmp_path / "run" / "train_config.yaml").read_text())
    assert saved["optim"]["lr"] == 5e-4  # the overrides are what was recorded


def test_bad_config_is_one_clear_error(tmp_path):
    (tmp_path / "c.yaml").write_text("stage: init_query\nmodel: {query_model: q}\ndata: {train_file: t.jsonl}\noptim: {lr: -1}\n")
    res = CliRunner().invoke(_app(), ["train", "--config", str(tmp_path / "c.yaml")])
    assert res.exit_code != 0
    assert "optim.lr" in str(res.exception)


def test_recipe_runs_all_stages_and_skips_finished(tiny_dir, tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "recipe"
    args = ["train", "recipe", "--query-model", str(tiny_dir / "tiny-bert"), "--document-model",
            str(tiny_dir / "tiny-qwen3"), "--train", str(tiny_dir / "train.jsonl"), "--output", str(out),
            "--set", "optim.max_steps=2", "--set", "optim.batch_size=8", "--set", "data.n_negatives=1",
            "--set", "runtime.log_with=null", "--set", "runtime.progress_bar=false", "--set", "runtime.cpu=true",
            "--set", "model.query_max_seq_length=32", "--set", "model.document_max_seq_length=32",
            "--set", "model.lora.r=4", "--set", "model.lora.alpha=8",
            "--set", "init_document:loss.matryoshka_dims=[32,64]"]
    res = CliRunner().invoke(_app(), args)
    assert res.exit_code == 0, res.output
    for stage in ("init_query", "init_document", "stage1", "stage2"):
        assert read_result(out / stage).completed, stage
    assert (out / "alignment.jsonl").is_file()  # Stage I data built from the training file
    stage2 = json.loads((out / "stage2" / "train_result.json").read_text())
    assert stage2["care_model"].endswith("stage2/model")
    from sentence_transformers import SentenceTransformer

    care = SentenceTransformer(stage2["care_model"], device="cpu")
    assert care.encode_query(["头痛"]).shape == care.encode_document(["头痛"]).shape == (1, 64)
    mtime = (out / "stage2" / "train_result.json").stat().st_mtime_ns
    res = CliRunner().invoke(_app(), args)  # rerun: every stage is already finished
    assert res.exit_code == 0, res.output
    assert (out / "stage2" / "train_result.json").stat().st_mtime_ns == mtime


def _alignment_inputs(tmp_path):
    from care.data.io import write_jsonl

    write_jsonl(tmp_path / "train.jsonl", [{"query": "头痛怎么办", "pos": ["头痛可以休息。多喝水有帮助。"]},
                                           {"query": "发烧吃什么药", "pos": ["发烧可以吃布洛芬。注意补液。"]}])
    write_jsonl(tmp_path / "log.jsonl", [{"_id": "s1", "text": "宝宝十个月没长牙怎么办"}, {"_id": "s2", "text": "头痛怎么办"}])
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "感冒时要多休息。咳嗽可以喝止咳糖浆。"}])


def test_alignment_command_puts_unlabelled_questions_and_sentences_on_the_query_side(tmp_path):
    _alignment_inputs(tmp_path)
    out = tmp_path / "alignment.jsonl"
    res = CliRunner().invoke(_app(), ["train", "alignment", "--train", str(tmp_path / "train.jsonl"), "-o", str(out),
                                      "--queries", str(tmp_path / "log.jsonl"), "--corpus", str(tmp_path / "corpus.jsonl"),
                                      "--sentences", "10", "--no-documents"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {r["type"] for r in rows} == {"query_align"}
    queries = [r["query"] for r in rows]
    assert queries[:3] == ["头痛怎么办", "发烧吃什么药", "宝宝十个月没长牙怎么办"]  # the repeated question kept once
    assert set(queries[3:]) == {"感冒时要多休息", "咳嗽可以喝止咳糖浆"}
    assert f"{out}: {len(rows)} alignment rows (2 unlabelled questions and 2 corpus sentences" in res.output


def test_alignment_command_refuses_bad_inputs_by_name(tmp_path):
    _alignment_inputs(tmp_path)
    args = ["train", "alignment", "--train", str(tmp_path / "train.jsonl"), "-o", str(tmp_path / "a.jsonl")]
    res = CliRunner().invoke(_app(), [*args, "--sentences", "10"])
    assert res.exit_code != 0 and "give --corpus" in str(res.exception)
    for flag, value in (("--sentences", "-1"), ("--negatives", "0"), ("--sentence-max-chars", "3")):
        res = CliRunner().invoke(_app(), [*args, flag, value])
        assert res.exit_code == 2 and flag in res.output, res.output  # refused by the option, naming it
    (tmp_path / "log.jsonl").write_text('{"_id": "s1", "text": "头痛"}\n{"_id": "s2"}\n', encoding="utf-8")
    res = CliRunner().invoke(_app(), [*args, "--queries", str(tmp_path / "log.jsonl")])
    assert res.exit_code != 0 and "log.jsonl, line 2, field 'text'" in str(res.exception)
    assert not (tmp_path / "a.jsonl").exists()
