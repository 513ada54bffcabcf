"""``care run`` / ``care demo`` end to end on the demo config shrunk for CI: run folder, manifest, table, ranking,
index with the best model, crash + resume, rerun skips, a changed setting refused, the console."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from care.errors import CareError
from care.pipeline import run as pipeline
from care.pipeline.cli import demo_config_path
from care.pipeline.config import STEPS, load_run_config
from care.pipeline.console import route_logs
from care.pipeline.run import run_pipeline

#: The demo without e5, a few rows, one tiny epoch, two timed queries, two tasks.
SHRUNK = ["curate.encoder=hashing", "recipes.student.enabled=false", "models.references={BM25: bm25}",
          "recipes.care.epochs=1", "recipes.care.max_train_examples=16", "recipes.care.batch_size=8",
          "curate.raw_query_limit=12", "curate.judge_thresholds={S: 0.5, A: 0.4, B: 0.35, C: 0.25}",
          "curate.label_depth=8", "recipes.care.document_max_length=32", "recipes.care.query_max_length=24",
          "evaluate.latency_queries=2", "evaluate.latency_rounds=1", "show_progress=false",
          "inputs.tasks=[demo:CMedTEB-Demo-Retrieval, demo:CMedTEB-Demo-STS]"]
STEPS_RUN = [s for s in STEPS if s not in ("train_student", "train_baselines")]
TRAINED = ["symmetric small", "symmetric large", "CARE w/o Stage II", "CARE"]


class Crash(RuntimeError):
    """Stands for a process dying in the middle of a step."""


def shrunk_config(*extra: str):
    return load_run_config(demo_config_path(tiny=True), [*SHRUNK, *extra])


@pytest.fixture(scope="module")
def runs(module_scratch):
    """Three runs into one folder: crashing in ``index``, resuming, then rerunning; with every step call logged."""
    folder = module_scratch / "run"
    config = shrunk_config()
    real = dict(pipeline.STEPS)
    calls: list[str] = []

    def spy(name):
        def wrapped(ctx):
            calls.append(name)
            return real[name](ctx)
        return wrapped

    def crash(ctx):
        calls.append("index")
        raise Crash("killed while building the index")

    mp = pytest.MonkeyPatch()
    try:
        for name in real:
            mp.setitem(pipeline.STEPS, name, spy(name))
        mp.setitem(pipeline.STEPS, "index", crash)
        with pytest.raises(pipeline.StepFailed) as failed:
            run_pipeline(config, folder)
        assert isinstance(failed.value.__cause__, Crash) and failed.value.step == "index"
        crashed_manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        crashed_calls = list(calls)
        mp.setitem(pipeline.STEPS, "index", spy("index"))
        calls.clear()
        resumed = run_pipeline(config, folder)
        resumed_calls = list(calls)
        resumed_manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        calls.clear()
        again = run_pipeline(config, folder)
        again_calls = list(calls)
    finally:
        mp.undo()
    return {"folder": folder, "config": config, "crashed_manifest": crashed_manifest, "crashed_calls": crashed_calls,
            "resumed": resumed, "resumed_calls": resumed_calls, "resumed_manifest": resumed_manifest,
            "again": again, "again_calls": again_calls}


def test_crash_marks_the_step_failed_and_keeps_finished_steps(runs):
    manifest = runs["crashed_manifest"]
    assert runs["crashed_calls"] == STEPS_RUN[:STEPS_RUN.index("index") + 1]
    assert manifest["steps"]["index"]["status"] == "failed"
    assert "killed while building the index" in manifest["steps"]["index"]["error"]
    for name in STEPS_RUN[:STEPS_RUN.index("index")]:
        assert manifest["steps"][name]["status"] == "done"
    assert "report" not in manifest["steps"]


def test_resume_runs_only_the_unfinished_steps(runs):
    assert runs["resumed_calls"] == ["index", "report"]
    assert runs["resumed"].steps_skipped == STEPS_RUN[:STEPS_RUN.index("index")]
    before, after = runs["crashed_manifest"]["steps"], runs["resumed_manifest"]["steps"]
    for name in runs["resumed"].steps_skipped:  # finished steps untouched
        assert after[name] == before[name]
    assert after["index"]["status"] == "done" and after["index"]["attempts"] == 2


def test_second_run_skips_every_step(runs):
    again = runs["again"]
    assert runs["again_calls"] == []
    assert again.steps_run == [] and again.steps_skipped == STEPS_RUN
    assert again.table == runs["resumed"].table


def test_run_folder_manifest_and_table(runs):
    folder, report = runs["folder"], runs["resumed"]
    manifest = runs["resumed_manifest"]
    assert manifest["config"] == runs["config"].to_dict()
    assert manifest["versions"]["torch"] and manifest["versions"]["python"]
    assert all(manifest["steps"][s]["seconds"] is not None for s in STEPS_RUN)
    # curate: PII of the raw questions replaced; label: shipped rows + labelled rows, every row with 7 negatives
    curate = manifest["steps"]["curate"]["outputs"]
    assert curate["queries"]["pii_removed"].get("PHONE", 0) > 0
    assert "[PHONE]" in (folder / "curate" / "queries.jsonl").read_text(encoding="utf-8")
    label = manifest["steps"]["label"]["outputs"]
    rows = [json.loads(line) for line in (folder / "label" / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    assert label["labelled_rows_added"] > 0 and label["ready_rows"] == 378
    held_out = label["validation"]["held_out_rows"] if label["validation"] else 0  # the safety net's split
    assert len(rows) == label["train_rows"] and held_out > 0
    assert label["train_rows"] + held_out == label["ready_rows"] + label["labelled_rows_added"]
    assert all(len(r["neg"]) == 7 and not set(r["neg"]) & set(r["pos"]) for r in rows)
    # every model on every task, with latency for the dense ones
    lead, rest = report.table.strip().split("\n\n", 1)  # what the run found, the table, the latency notes
    assert lead.startswith("**What this run found.** CARE scores") and "of symmetric large" in lead
    table, notes = rest.split("\n\n", 1)
    assert "latency self-check" in notes.lower() and "the engine's floor" in notes
    lines = table.splitlines()
    assert lines[0].startswith("| model | CMedTEB-Demo-Retrieval (ndcg_at_10) | CMedTEB-Demo-STS (pearson) |")
    models = [line.split("|")[1].strip() for line in lines[2:]]
    assert models == ["BM25", *TRAINED]
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    for row in results["rows"]:
        assert set(row["scores"]) == {"CMedTEB-Demo-Retrieval", "CMedTEB-Demo-STS", "validation"}
        assert (row["query_latency_ms"] is None) == (row["model"] == "BM25")
        if row["model"] != "BM25":  # every dense row in one engine, with a speed-up when the self-check passed
            assert row["query_latency"]["engine"] == "onnx-int8" and (row["speedup"] is not None) == (
                json.loads((folder / "eval" / "latency.json").read_text(encoding="utf-8"))["self_check"]["passed"])
    assert 0.2 < results["rows"][0]["scores"]["CMedTEB-Demo-Retrieval"] < 0.9  # BM25 as measured by the demo stats
    assert Path(report.figure).is_file() and Path(report.figure).stat().st_size > 0


def test_the_best_trained_model_is_ranked_first_and_indexed(runs):
    """Ranked and chosen on the validation split the label step held out, never on the test data."""
    folder, report, manifest = runs["folder"], runs["resumed"], runs["resumed_manifest"]
    scores = {r["model"]: r["scores"]["validation"]
              for r in json.loads((folder / "results.json").read_text(encoding="utf-8"))["rows"]}
    assert [r["model"] for r in report.ranking] == sorted(TRAINED, key=lambda m: -scores[m])
    best = report.ranking[0]["model"]
    assert manifest["steps"]["index"]["outputs"]["label"] == best  # BM25 is a reference, never indexed
    index_manifest = json.loads((folder / "index" / "manifest.json").read_text(encoding="utf-8"))
    assert index_manifest["model"] == manifest["steps"]["index"]["outputs"]["model"]
    # the evaluation encoded this corpus with this model: the index copied its vectors, encoding nothing again
    assert manifest["steps"]["index"]["outputs"]["copied_from_cache"] == index_manifest["n_docs"] > 0
    assert report.serve_command == f"care serve --index {folder / 'index'}"
    assert report.serve_command in (folder / "results.md").read_text(encoding="utf-8")


def test_demo_cli_prints_the_table_ranking_and_serve_command(runs):
    from care.cli import app

    result = CliRunner().invoke(app, ["demo", "--output", str(runs["folder"]), "--skip-e5", "--no-progress", "--epochs", "1",
                                      *(f"--set={o}" for o in SHRUNK)])
    assert result.exit_code == 0, result.output
    assert "| CARE |" in result.output and "best trained model on" in result.output
    assert f"care serve --index {runs['folder'] / 'index'}" in result.output
    assert "0 step(s) run" in result.output


def test_redo_reruns_a_finished_step(runs, monkeypatch):
    calls = []
    monkeypatch.setitem(pipeline.STEPS, "report", lambda ctx: calls.append("report") or {"table": "redone"})
    report = run_pipeline(runs["config"], runs["folder"], redo=["report"])
    assert calls == ["report"] and report.steps_run == ["report"] and report.table == "redone"
    with pytest.raises(CareError, match="unknown step"):
        run_pipeline(runs["config"], runs["folder"], redo=["nope"])
    monkeypatch.undo()
    run_pipeline(runs["config"], runs["folder"], redo=["report"])  # leave the real report behind for the other tests


def test_resume_with_other_settings_is_refused(runs):
    with pytest.raises(CareError, match=r"other settings \(recipes\.care\.epochs\).*--fresh"):
        run_pipeline(shrunk_config("recipes.care.epochs=2"), runs["folder"])


def test_fresh_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(CareError, match="not a care run folder"):
        run_pipeline(shrunk_config(), tmp_path, fresh=True)
    assert (tmp_path / "precious.txt").is_file()


def test_console_shows_progress_and_the_log_file_keeps_library_chatter(tmp_path, capsys):
    import logging

    handler, root = logging.StreamHandler(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # as the care command sets it up
    try:
        with route_logs(tmp_path) as log_file:
            logging.getLogger("care.pipeline.run").info("step 1/2 curate: running")
            logging.getLogger("accelerate.checkpointing").info("Saving current state to checkpoint-1")
            logging.getLogger("care.train.engine.trainer").info("epoch 1 loss 0.5")
            logging.getLogger("care.encoders.hf").warning("slow tokenizer")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    terminal = capsys.readouterr().err
    assert "step 1/2 curate" in terminal and "slow tokenizer" in terminal
    assert "Saving current state" not in terminal and "epoch 1 loss" not in terminal
    text = log_file.read_text(encoding="utf-8")
    assert all(s in text for s in ("step 1/2 curate", "Saving current state", "epoch 1 loss", "slow tokenizer"))
