"""``care run``'s safety net: a Stage II that makes CARE worse is flagged on validation and not indexed.

The recipe's training is replaced by writing fixed towers (the test is about the net, not about training):
every stage up to Stage I produces one random-init tiny BERT on both sides, which ranks the demo's documents
by shared characters, and the "broken" Stage II pairs a query tower of another random init with that document
tower, which ranks at random. Scoring, flagging, evaluation and the index step's choice are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from care.pipeline.run import run_pipeline
from care.train.engine.trainer import TrainResult

from .test_run import shrunk_config

STEPS = ["label", "train_care", "evaluate", "index", "report"]


@pytest.fixture(scope="module")
def towers(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny BERTs with one character vocabulary (the demo's texts), random init with seeds 0 and 1."""
    from care.data.retrieval import iter_documents
    from care.demo import demo_tasks_root
    from care.models.presets import make_tiny_models

    root = tmp_path_factory.mktemp("towers")
    texts = [d.full_text for d in iter_documents(demo_tasks_root() / "CMedTEB-Demo-Retrieval" / "corpus.jsonl")]
    texts += [json.loads(line)["query"] for line in
              (demo_tasks_root() / "train" / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    make_tiny_models(texts, root / "a", seed=0)
    make_tiny_models(texts, root / "b", seed=1)
    return root / "a" / "tiny-bert", root / "b" / "tiny-bert"


def _fake_train(good: Path, other: Path):
    from care.models.asymmetric import build_care_model, save_care_model
    from care.models.query import build_query_encoder

    def train(config, resume: bool = False) -> TrainResult:
        out = Path(config.output_dir)
        tower = build_query_encoder(good, pooling="mean", max_seq_length=32)
        result = TrainResult(config.stage, str(out), 1, 0.0)
        if config.stage == "init_query":
            tower.save(str(out / "query"))
            result.query_model = str(out / "query")
        elif config.stage == "init_document":
            tower.save(str(out / "document"))
            result.document_model = str(out / "document")
        else:  # Stage I: the same tower on both sides; Stage II: a query tower that does not match the documents
            query = tower if config.stage == "stage1" else build_query_encoder(other, pooling="mean", max_seq_length=32)
            query.save(str(out / "query"))
            result.query_model = str(out / "query")
            result.care_model = str(save_care_model(build_care_model(query, tower, default_prompt_name=None),
                                                    out / "model"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_result.json").write_text(json.dumps(result.__dict__), encoding="utf-8")
        return result

    return train


@pytest.fixture(scope="module")
def run(towers, module_scratch):
    folder = module_scratch / "run"
    config = shrunk_config("inputs.raw_queries=null", "validation.share=0.15", "validation.min_queries=5",
                           "inputs.tasks=[demo:CMedTEB-Demo-Retrieval]", f"steps={json.dumps(STEPS)}")
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr("care.train.recipes.recipe.train", _fake_train(*towers))
        report = run_pipeline(config, folder)
    finally:
        mp.undo()
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return folder, report, manifest


def test_the_broken_stage_is_flagged_on_validation(run):
    folder, _, manifest = run
    checks = manifest["steps"]["train_care"]["outputs"]["validation"]
    assert checks["CARE"]["flagged"] is True and checks["CARE"]["started_from"] == "CARE w/o Stage II"
    assert checks["CARE"]["ndcg_at_10"] < checks["CARE w/o Stage II"]["ndcg_at_10"]
    assert checks["CARE w/o Stage II"]["flagged"] is False
    assert 0.99 < checks["CARE w/o Stage II"]["fidelity"] <= 1.0001  # one tower on both sides
    assert checks["CARE"]["fidelity"] < 0.99
    scores = json.loads((folder / "models" / "care" / "validation" / "scores.json").read_text(encoding="utf-8"))
    assert set(scores["models"]) >= {"base query model", "base document model", "init_query", "stage2"}


def test_training_rows_exclude_the_validation_split(run):
    folder, _, manifest = run
    label = manifest["steps"]["label"]["outputs"]
    trained = {json.loads(line)["query"] for line in (folder / "label" / "train.jsonl").read_text(encoding="utf-8").splitlines()}
    held = {json.loads(line)["query"] for line in
            (folder / "label" / "validation" / "held_out.jsonl").read_text(encoding="utf-8").splitlines()}
    assert held and not trained & held
    assert label["validation"]["held_out_rows"] == len(held) and label["train_rows"] == len(trained)


def test_the_index_serves_the_best_model_on_validation_not_the_broken_one(run):
    folder, report, manifest = run
    index = manifest["steps"]["index"]["outputs"]
    results = [json.loads(p.read_text(encoding="utf-8")) for p in (folder / "eval" / "results").glob("*__validation.json")]
    validation = {r["model"]: r["main_value"] if "main_value" in r else r["scores"][r["main_score"]] for r in results}
    trained = ["symmetric small", "symmetric large", "CARE w/o Stage II", "CARE"]
    best = max((m for m in validation if m in trained), key=validation.get)
    assert index["label"] == best != "CARE"
    assert index["chosen_by"] == "the best trained model on validation"
    assert index["care_alternative"].startswith(f"CARE (the small query tower) scores {validation['CARE']:.4f}")
    # the recipe's own checks and the evaluation score the same models the same way (instruction, prefixes)
    checks = manifest["steps"]["train_care"]["outputs"]["validation"]
    for row in trained:
        assert checks[row]["ndcg_at_10"] == pytest.approx(validation[row], abs=1e-4), row
    assert "--set index.model='CARE'" in index["care_alternative"]
    text = (folder / "results.md").read_text(encoding="utf-8")
    assert "worse than the stage it started from" in text and "validation" in report.table
