"""``benchmarks/tune_care_tiny.py`` over :mod:`care.train.recipes.tiny_sweep`: a sweep per seed on the dev set, its record of the recipe's stages and variants."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from care.train.recipes import tiny_sweep as tune


def test_a_sweep_report_becomes_the_records_rows():
    report = {"base_rows": {"init_document": {"scores": {"ndcg_at_10": 0.5}}, "stage1": {"scores": {"ndcg_at_10": 0.3}},
                            "base document model": {"scores": {"ndcg_at_10": 0.1}}},
              "rows": {"base": {"scores": {"ndcg_at_10": 0.4}}, "doclr": {"scores": {"ndcg_at_10": 0.45}}}}
    assert tune.seed_rows(report) == {"symmetric large": 0.5, "after Stage I (no Stage II)": 0.3, "recipe": 0.4,
                                      "doclr": 0.45}


@pytest.mark.slow  # ~20 s: the tiny recipe and three variants on a 240-row dev set
def test_the_driver_sweeps_and_records(tmp_path):
    from .tiny_dev_set import write_dev_set

    data = write_dev_set(tmp_path)
    command = [sys.executable, "-m", "benchmarks.tune_care_tiny", "--seeds", "0", "--threads", "1", "--work",
               str(tmp_path / "work"), "--results", str(tmp_path / "results"),
               "--variant", "doclr=stage2:optim.document_lr=1e-4",
               "--variant", "s1=stage1:optim.epochs=1;recipe:skip_stage2=true",
               "--variant", "sft=stage2:stage=stage1_sft"]
    done = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "CARE_DEV_SET": str(data)})
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "results" / "care_validation" / "toyhom.json").read_text(encoding="utf-8"))
    assert list(record["scores"]) == ["symmetric large", "symmetric small", "after Stage I (no Stage II)", "recipe",
                                      "doclr", "s1", "sft"]
    assert record["config"]["variants"]["s1"] == ["stage1:optim.epochs=1", "recipe:skip_stage2=true"]
    assert record["config"]["split"]["validation_queries"] >= 20  # whole answer groups of 8 questions held out
    sweep = json.loads((tmp_path / "work" / "seed0" / "sweep.json").read_text(encoding="utf-8"))
    assert sweep["best"] in {"base", "doclr", "s1", "sft"}
    assert sweep["rows"]["s1"]["model"].split("?")[0].endswith("stage1/model")  # Stage I alone: its model is scored
    bad = subprocess.run([sys.executable, "-m", "benchmarks.tune_care_tiny", "--variant", "x=stage2"],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CARE_DEV_SET": str(data)})
    assert bad.returncode != 0 and "variant 'x': item 'stage2' is not KEY=VALUE" in bad.stderr
