"""``care demo`` end to end on a shrunk config: run folder, manifest, table, crash + resume, rerun skips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from care.demo import pipeline
from care.demo.pipeline import run_demo
from care.demo.pipeline_config import DEMO_STEPS, DemoRunConfig
from care.encoders.hashing import HashingCharEncoder
from care.encoders.memo import MemoEncoder
from care.train.mining import mine_negatives
from care.errors import CareError
from care.train.alignment import char_overlap

#: A pipeline small enough for CI: no e5, a few rows, one tiny epoch, two timed queries.
SHRUNK = {"skip_e5": True, "epochs": 1, "max_train_examples": 16, "batch_size": 8, "raw_query_limit": 12,
          "judge_thresholds": {"S": 0.5, "A": 0.4, "B": 0.35, "C": 0.25},
          "label_depth": 8, "document_max_length": 32, "query_max_length": 24, "latency_queries": 2,
          "latency_rounds": 1, "show_progress": False, "tasks": ["CMedTEB-Demo-Retrieval", "CMedTEB-Demo-STS"]}
STEPS_WITHOUT_E5 = [s for s in DEMO_STEPS if s != "train_student"]


class Crash(RuntimeError):
    """Stands for a process dying in the middle of a step."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs into one folder: crashing in ``index``, resuming, then rerunning; with every step call logged."""
    folder = tmp_path_factory.mktemp("demo") / "run"
    config = DemoRunConfig(output=str(folder), **SHRUNK)
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
        with pytest.raises(Crash):
            run_demo(config)
        crashed_manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        crashed_calls = list(calls)
        mp.setitem(pipeline.STEPS, "index", spy("index"))
        calls.clear()
        resumed = run_demo(config)
        resumed_calls = list(calls)
        resumed_manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        calls.clear()
        again = run_demo(config)
        again_calls = list(calls)
    finally:
        mp.undo()
    return {"folder": folder, "config": config, "crashed_manifest": crashed_manifest, "crashed_calls": crashed_calls,
            "resumed": resumed, "resumed_calls": resumed_calls, "resumed_manifest": resumed_manifest,
            "again": again, "again_calls": again_calls}


def test_crash_marks_the_step_failed_and_keeps_finished_steps(runs):
    manifest = runs["crashed_manifest"]
    assert runs["crashed_calls"] == STEPS_WITHOUT_E5[:STEPS_WITHOUT_E5.index("index") + 1]
    assert manifest["steps"]["index"]["status"] == "failed"
    assert "killed while building the index" in manifest["steps"]["index"]["error"]
    for name in STEPS_WITHOUT_E5[:STEPS_WITHOUT_E5.index("index")]:
        assert manifest["steps"][name]["status"] == "done"
    assert "report" not in manifest["steps"]


def test_resume_runs_only_the_unfinished_steps(runs):
    assert runs["resumed_calls"] == ["index", "report"]
    assert runs["resumed"].steps_skipped == STEPS_WITHOUT_E5[:STEPS_WITHOUT_E5.index("index")]
    before, after = runs["crashed_manifest"]["steps"], runs["resumed_manifest"]["steps"]
    for name in runs["resumed"].steps_skipped:  # finished steps untouched
        assert after[name] == before[name]
    assert after["index"]["status"] == "done" and after["index"]["attempts"] == 2


def test_second_run_skips_every_step(runs):
    again = runs["again"]
    assert runs["again_calls"] == []
    assert again.steps_run == [] and again.steps_skipped == STEPS_WITHOUT_E5
    assert again.table == runs["resumed"].table


def test_run_folder_manifest_and_table(runs):
    folder, report = runs["folder"], runs["resumed"]
    manifest = runs["resumed_manifest"]
    assert DemoRunConfig.from_dict(manifest["config"]) == runs["config"]
    assert manifest["versions"]["torch"] and manifest["versions"]["python"]
    assert all(manifest["steps"][s]["seconds"] is not None for s in STEPS_WITHOUT_E5)
    # curate: PII of the raw questions replaced; label: shipped rows + labelled rows, every row with 7 negatives
    curate = manifest["steps"]["curate"]["outputs"]
    assert curate["queries"]["pii_removed"].get("PHONE", 0) > 0
    assert "[PHONE]" in (folder / "curate" / "queries.jsonl").read_text(encoding="utf-8")
    label = manifest["steps"]["label"]["outputs"]
    rows = [json.loads(line) for line in (folder / "label" / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    assert label["labelled_rows_added"] > 0 and label["shipped_rows"] == 378
    assert len(rows) == label["train_rows"] == label["shipped_rows"] + label["labelled_rows_added"]
    assert all(len(r["neg"]) == 7 and not set(r["neg"]) & set(r["pos"]) for r in rows)
    # every model on every task, with latency for the dense ones
    lines = report.table.strip().splitlines()
    assert lines[0].startswith("| model | CMedTEB-Demo-Retrieval (ndcg_at_10) | CMedTEB-Demo-STS (pearson) |")
    models = [line.split("|")[1].strip() for line in lines[2:]]
    assert models == ["BM25", "symmetric small", "symmetric large", "CARE w/o Stage II", "CARE"]
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    for row in results["rows"]:
        assert set(row["scores"]) == {"CMedTEB-Demo-Retrieval", "CMedTEB-Demo-STS"}
        assert (row["query_latency_ms"] is None) == (row["model"] == "BM25")
    assert 0.2 < results["rows"][0]["scores"]["CMedTEB-Demo-Retrieval"] < 0.9  # BM25 as measured by the demo stats
    assert Path(report.figure).is_file() and Path(report.figure).stat().st_size > 0
    # the index is built with CARE's document tower and the serve command points at it
    assert (folder / "index" / "manifest.json").is_file()
    assert report.serve_command == f"care serve --index {folder / 'index'}"
    assert report.serve_command in (folder / "results.md").read_text(encoding="utf-8")


def test_cli_prints_the_table_and_the_serve_command(runs, tmp_path):
    from care.cli import app

    config_file = tmp_path / "demo.json"
    config_file.write_text(json.dumps({k: v for k, v in SHRUNK.items() if k != "show_progress"}), encoding="utf-8")
    result = CliRunner().invoke(app, ["demo", "--output", str(runs["folder"]), "--config", str(config_file),
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "| CARE |" in result.output
    assert f"care serve --index {runs['folder'] / 'index'}" in result.output
    assert "0 step(s) run" in result.output


def test_redo_reruns_a_finished_step(runs, monkeypatch):
    calls = []
    monkeypatch.setitem(pipeline.STEPS, "report", lambda ctx: calls.append("report") or {"table": "redone"})
    report = run_demo(runs["config"], redo=["report"])
    assert calls == ["report"] and report.steps_run == ["report"] and report.table == "redone"
    with pytest.raises(CareError, match="unknown step"):
        run_demo(runs["config"], redo=["nope"])
    monkeypatch.undo()
    run_demo(runs["config"], redo=["report"])  # leave the real report behind for the other tests


def test_resume_with_other_settings_is_refused(runs):
    changed = DemoRunConfig.from_dict({**runs["config"].to_dict(), "epochs": 2})
    with pytest.raises(CareError, match="other settings.*epochs.*--fresh"):
        run_demo(changed)


def test_fresh_refuses_a_folder_that_is_not_a_demo_run(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(CareError, match="not a care demo run folder"):
        run_demo(DemoRunConfig(output=str(tmp_path), **SHRUNK), fresh=True)
    assert (tmp_path / "precious.txt").is_file()


def test_config_round_trips_and_rejects_unknown_steps():
    config = DemoRunConfig(output="x", seed=3, steps=["curate", "label"], judge_thresholds={"S": 0.9, "A": 0.8})
    assert DemoRunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert DemoRunConfig(skip_e5=True).selected_steps == STEPS_WITHOUT_E5
    with pytest.raises(CareError, match="unknown demo step"):
        DemoRunConfig(steps=["train"])
    with pytest.raises(CareError, match="unknown field"):
        DemoRunConfig.from_dict({"epoch": 1})


def test_memo_encoder_encodes_each_text_once_and_reloads(tmp_path):
    inner = HashingCharEncoder()
    memo = MemoEncoder(inner, tmp_path / "memo.npz")
    texts = ["高血压吃什么药", "心梗的早期表现", "高血压吃什么药"]
    first = memo.encode_documents(texts)
    np.testing.assert_allclose(first, inner.encode_documents(texts))
    memo.encode_documents(texts[:2])
    assert memo.encoded == 2 and memo.fingerprint == inner.fingerprint
    memo.save()
    again = MemoEncoder(inner, tmp_path / "memo.npz")
    np.testing.assert_array_equal(again.encode_documents(texts), first)
    assert again.encoded == 0


def test_mine_negatives_skips_positives_and_near_duplicates():
    pool = ["高血压患者应低盐饮食，每天盐少于5克。", "高血压患者应低盐饮食，每天食盐少于5克。",
            "糖尿病患者要控制主食。", "哮喘发作时使用吸入剂。", "胃炎要少吃辛辣。", "失眠可以先调整作息。"]
    rows = [{"query": "高血压饮食要注意什么", "pos": [pool[0]], "neg": [pool[4]]}]
    mined = mine_negatives(rows, pool, n=3, seed=0, keep_existing=True)[0]
    assert mined["neg"][0] == pool[4] and len(mined["neg"]) == 3 and len(set(mined["neg"])) == 3
    assert pool[0] not in mined["neg"] and pool[1] not in mined["neg"]  # the positive and its near-duplicate
    assert char_overlap(pool[0], pool[1]) >= 0.5
