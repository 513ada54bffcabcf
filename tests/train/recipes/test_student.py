"""The student recipe: the cut, Stage I + the query-side fine-tune against a frozen teacher, a model folder
that bench / index / serve take directly, resume, and a changed recipe refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from care.config import ConfigError
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import SPEC_FILE_IN_FOLDER, load_model
from care.encoders.sides import load_side
from care.errors import CareError
from care.train.recipes.student import (
    StudentConfig,
    StudentFineTune,
    StudentPaths,
    StudentStageOne,
    alignment_texts,
    load_student_config,
    train_student,
    train_symmetric_baseline,
)

from ..trainer_fixtures import write_rows

ROWS = [
    {"query": "糖尿病一般需要怎么治疗？", "pos": ["糖尿病患者首先控制饮食，适当运动。血糖仍高时考虑口服降糖药。"]},
    {"query": "高血压吃什么药好？", "pos": ["高血压常用药物有钙离子拮抗剂和利尿剂。需要在医生指导下长期服用。"]},
    {"query": "感冒发烧怎么办？", "pos": ["感冒发烧应多喝水、注意休息。体温超过38.5度可以服用退烧药。"]},
    {"query": "胃痛是什么原因？", "pos": ["胃痛常见原因有胃炎和胃溃疡。饮食不规律也会引起胃痛。"]},
]
FAST = {"batch_size": 4, "checkpoint_every": 50, "progress_bar": False, "query_max_length": 32, "document_max_length": 48,
        "stage1": {"epochs": 1, "lr": 1e-3, "sentences": None, "sentence_source": "answers"},
        "finetune": {"epochs": 1, "lr": 1e-3}}


def _teacher(tiny_dir):
    """The tiny BERT as a frozen symmetric teacher (mean pooling: a plain HF folder)."""
    return f"{tiny_dir / 'tiny-bert'}?pooling=mean"


def test_shipped_recipe_is_the_measured_one():
    config = load_student_config("configs/student/e5.yaml")
    assert config == StudentConfig()
    assert (config.teacher, config.layers, config.keep, config.query_prefix) == ("e5", 6, "strided", "query: ")
    assert config.stage1 == StudentStageOne() and config.finetune == StudentFineTune(negatives=0)
    with pytest.raises(ConfigError, match="config field 'stage1.sentence_source': must be one of corpus, answers"):
        StudentConfig.from_dict({"stage1": {"sentence_source": "web"}})


@pytest.fixture(scope="module")
def student(tiny_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("student")
    write_rows(root / "train.jsonl", ROWS)
    config = StudentConfig.from_dict({**FAST, "teacher": _teacher(tiny_dir), "layers": 1, "keep": "first",
                                      "pooling": "mean"})
    paths = StudentPaths(str(root / "train.jsonl"), str(root / "run"))
    return config, paths, train_student(config, paths)


def test_student_cuts_the_teacher_and_trains_both_stages(student):
    from transformers import AutoConfig

    config, paths, result = student
    assert AutoConfig.from_pretrained(result.base).num_hidden_layers == 1
    assert set(result.stages) == {"stage1", "stage1_sft"} and all(r.global_step >= 1 for r in result.stages.values())
    # Stage I learned on the questions and the answers' sentences (query-side rows only)
    lines = (Path(paths.output_dir) / "alignment.jsonl").read_text(encoding="utf-8").splitlines()
    align = [json.loads(line) for line in lines]
    assert {row["type"] for row in align} == {"query_align"} and len(align) == len(alignment_texts(config, paths)) > 4


def test_a_static_embedding_student_trains_its_embeddings(tiny_dir, tmp_path):
    """layers: 0 is the static-embedding tower; it must train its embeddings (frozen ones are refused)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig

    with pytest.raises(ConfigError, match="set freeze_embeddings: false"):
        StudentConfig.from_dict({**FAST, "teacher": _teacher(tiny_dir), "layers": 0})
    with pytest.raises(ConfigError, match="'layers': must be >= 0"):
        StudentConfig.from_dict({**FAST, "teacher": _teacher(tiny_dir), "layers": -1, "freeze_embeddings": False})
    write_rows(tmp_path / "train.jsonl", ROWS)
    config = StudentConfig.from_dict({**FAST, "teacher": _teacher(tiny_dir), "layers": 0, "freeze_embeddings": False,
                                      "pooling": "mean"})
    result = train_student(config, StudentPaths(str(tmp_path / "train.jsonl"), str(tmp_path / "run")))
    assert AutoConfig.from_pretrained(result.base).num_hidden_layers == 0
    before = load_file(str(Path(result.base) / "model.safetensors"))
    after = load_file(str(next((tmp_path / "run" / "finetune").rglob("model.safetensors"))))
    table = next(k for k in before if k.endswith("word_embeddings.weight"))
    assert not torch.equal(before[table], after[next(k for k in after if k.endswith("word_embeddings.weight"))])
    assert load_model(result.model).encode_queries(["头痛怎么办"]).shape[0] == 1


def test_stage1_can_distill_the_teachers_layers_beside_the_output_alignment(tiny_dir, tmp_path):
    layered = {**FAST, "stage1": {**FAST["stage1"], "lambda_hidden": 1.0, "lambda_relations": 0.5, "relation_heads": 4}}
    with pytest.raises(ConfigError, match="no layers to distill"):
        StudentConfig.from_dict({**layered, "teacher": _teacher(tiny_dir), "layers": 0, "freeze_embeddings": False})
    # older runs' recorded settings stay valid: the layer keys join the resume key only when they are used
    assert "lambda_hidden" not in StudentConfig().resume_key()["stage1"]
    write_rows(tmp_path / "train.jsonl", ROWS)
    config = StudentConfig.from_dict({**layered, "teacher": _teacher(tiny_dir), "layers": 1, "keep": "first",
                                      "pooling": "mean"})
    assert config.resume_key()["stage1"]["lambda_relations"] == 0.5
    train_student(config, StudentPaths(str(tmp_path / "train.jsonl"), str(tmp_path / "run")))
    logged = [json.loads(line) for line in (tmp_path / "run" / "stage1" / "metrics.jsonl").read_text().splitlines()]
    assert all({"loss/hidden", "loss/relations", "loss/mse"} <= set(row) for row in logged)
    finetune = (tmp_path / "run" / "finetune" / "metrics.jsonl").read_text().splitlines()
    assert "loss/hidden" not in json.loads(finetune[0])  # the fine-tune is the plain one


def test_an_e5_student_keeps_the_export_it_was_cut_from_as_its_layer_teacher(tiny_dir, tmp_path, monkeypatch):
    import shutil

    from care.models import e5_export
    from care.train.recipes.student import LAYER_TEACHER_FOLDER, layer_teacher, make_base

    exports: list[Path] = []

    def fake_export(folder):  # the tiny BERT stands in for e5's weights: one export per run, not two
        exports.append(Path(folder))
        shutil.copytree(tiny_dir / "tiny-bert", folder)

    monkeypatch.setattr(e5_export, "export_e5", fake_export)
    plain = StudentConfig.from_dict({**FAST, "layers": 1})
    make_base(plain, tmp_path / "plain")
    assert layer_teacher(plain, tmp_path / "plain") is None and not (tmp_path / "plain" / LAYER_TEACHER_FOLDER).exists()
    layered = StudentConfig.from_dict({**FAST, "layers": 1, "stage1": {**FAST["stage1"], "lambda_hidden": 1.0}})
    base = make_base(layered, tmp_path / "layered")
    deep = layer_teacher(layered, tmp_path / "layered")
    assert deep == str(tmp_path / "layered" / LAYER_TEACHER_FOLDER) and (Path(deep) / "config.json").is_file()
    assert (base / "config.json").is_file() and len(exports) == 2  # one per run folder
    with pytest.raises(ConfigError, match="no local weights whose layers"):
        layer_teacher(StudentConfig.from_dict({**FAST, "teacher": "openai:text-embedding-3-small",
                                                "stage1": {**FAST["stage1"], "lambda_hidden": 1.0}}), tmp_path)


def test_model_folder_pairs_the_student_with_the_teacher(student, tiny_dir):
    config, _, result = student
    spec = (Path(result.model) / SPEC_FILE_IN_FOLDER).read_text(encoding="utf-8")
    assert "query_prefix: 'query: '" in spec and _teacher(tiny_dir) in spec
    pair = load_model(result.model)
    assert isinstance(pair, AsymmetricEncoder)
    query, document = load_side(result.model, "query"), load_side(result.model, "document")
    texts = ["头痛怎么办"]
    np.testing.assert_allclose(pair.encode_queries(texts), query.encode_queries(texts), atol=1e-6)
    teacher = load_model(_teacher(tiny_dir))
    np.testing.assert_allclose(document.encode_documents(texts), teacher.encode_documents(texts), atol=1e-6)
    # like the teacher's convention: the prefix, and task instructions ignored
    np.testing.assert_allclose(query.encode_queries(texts, instruction="Retrieve answers"), query.encode_queries(texts),
                               atol=1e-6)


def test_rerun_trains_nothing_and_other_settings_are_refused(student):
    config, paths, result = student
    again = train_student(config, paths)
    assert {k: r.global_step for k, r in again.stages.items()} == {k: r.global_step for k, r in result.stages.items()}
    with pytest.raises(CareError, match="other settings.*config"):
        train_student(config.with_overrides(["finetune.epochs=2"]), paths)


def test_symmetric_baseline_is_the_cut_on_both_sides(student):
    config, paths, result = student
    symmetric = train_symmetric_baseline(config, paths)
    assert symmetric.base == result.base and symmetric.stages["init_query"].global_step >= 1
    model = load_model(symmetric.model)
    query, document = load_side(symmetric.model, "query"), load_side(symmetric.model, "document")
    np.testing.assert_allclose(model.encode_documents(["胃痛"]), document.encode_documents(["胃痛"]), atol=1e-6)
    assert query.fingerprint == document.fingerprint  # one tower


def test_a_teacher_without_local_weights_needs_a_base(tmp_path):
    write_rows(tmp_path / "train.jsonl", ROWS)
    config = StudentConfig.from_dict({**FAST, "teacher": "openai:text-embedding-3-small"})
    with pytest.raises(ConfigError, match="no local weights to cut a student from; set 'base'"):
        train_student(config, StudentPaths(str(tmp_path / "train.jsonl"), str(tmp_path / "run")))
    with pytest.raises(ConfigError, match="no corpus was given"):
        alignment_texts(StudentConfig(), StudentPaths(str(tmp_path / "train.jsonl"), str(tmp_path / "run")))


def test_cli_resumes_a_finished_student_and_names_its_folder(student, tmp_path):
    from typer.testing import CliRunner

    from care.cli import app

    config, paths, result = student
    recipe = config.save(tmp_path / "student.yaml")
    invoked = CliRunner().invoke(app, ["train", "student", "--config", str(recipe), "--train", paths.train_file,
                                       "--output", paths.output_dir])
    assert invoked.exit_code == 0, invoked.output
    assert f"(documents): {result.model}" in invoked.output and "stage1_sft:" in invoked.output
    refused = CliRunner().invoke(app, ["train", "student", "--config", str(recipe), "--train", paths.train_file,
                                       "--output", paths.output_dir, "--set", "layers=2"])
    assert isinstance(refused.exception, CareError) and "other settings" in str(refused.exception)
