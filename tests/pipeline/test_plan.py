"""``care run CONFIG --check``: the config and every input checked as the run checks them, the plan printed (steps in
order, what each reads and writes, done / resumes / runs), nothing trained and nothing written; an error names the
config key of the input."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from care.cli import USER_ERROR_EXIT, app, run_cli
from care.errors import CareError
from care.pipeline import run as pipeline
from care.pipeline.config import load_run_config
from care.pipeline.plan import REDONE, RESUMES, RUNS, SKIPPED, format_plan, plan_run
from care.pipeline.run import StepFailed, run_pipeline

from ..beir_folder import write_beir_folder

CONFIG = {"curate": {"encoder": "hashing"}, "show_progress": False, "seed": 7,
          "models": {"query": "tiny", "document": "tiny", "references": {"BM25": "bm25"}}}
#: The steps a config with a train file, a task and the CARE recipe has work for, in order.
STEPS = ["label", "train_care", "evaluate", "latency", "index", "report"]


def _config_file(tmp_path, **inputs):
    beir = write_beir_folder(tmp_path)
    path = tmp_path / "run.yaml"
    fields = {"train_file": str(beir.train_positive), "tasks": [str(beir.folder)], **inputs}
    path.write_text(json.dumps({**CONFIG, "inputs": fields}), encoding="utf-8")
    return path


def _snapshot(folder):
    """Every file under ``folder`` with its bytes and modification time."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_check_prints_the_plan_and_creates_no_run_folder(tmp_path, no_step_runs):
    config, folder = _config_file(tmp_path), tmp_path / "runs" / "mine"
    result = CliRunner().invoke(app, ["run", str(config), "-o", str(folder), "--check", "--threads", "3"])
    assert result.exit_code == 0, result.output
    assert not folder.exists() and not folder.parent.exists() and no_step_runs == []
    lines = result.output.splitlines()
    assert lines[0] == f"checked: the config and every input; the run would write to {folder} (a new run)"
    assert [line.split(".", 1)[1].split(":")[0].strip() for line in lines if line.startswith("  ") and ". " in line
            and line.strip()[0].isdigit()] == STEPS
    assert f"  2. train_care: {RUNS}" in lines
    assert "       reads:  label/train.jsonl; models.query (tiny); models.document (tiny)" in lines
    assert "       writes: models/care/" in lines
    assert "left out: curate (no work in this config), train_student (no work in this config), " \
           "train_baselines (no work in this config)" in lines
    assert "  models.references[BM25]: bm25" in lines
    assert "seed: 7; threads: 3" in lines
    assert any(line.startswith("inputs: train_rows 8; task ") and "(documents 10, queries 6, judgements 6)" in line
               for line in lines)


def test_check_on_an_earlier_run_says_what_is_done_what_resumes_and_changes_nothing(tmp_path, no_step_runs,
                                                                                   monkeypatch):
    config_file, folder = _config_file(tmp_path), tmp_path / "run"
    config = load_run_config(config_file)

    def broken(ctx):
        raise ValueError("no latency today")

    monkeypatch.setitem(pipeline.STEPS, "latency", broken)
    with pytest.raises(StepFailed):
        run_pipeline(config, folder)
    before = _snapshot(folder)
    calls = list(no_step_runs)
    plan = plan_run(config, folder, redo=["train_care"])
    assert plan.resumes and [(s.name, s.status) for s in plan.steps] == [
        ("label", SKIPPED), ("train_care", REDONE), ("evaluate", SKIPPED), ("latency", RESUMES), ("index", RUNS),
        ("report", RUNS)]
    assert plan.steps[3].note == "failed last time: ValueError: no latency today"
    assert "  4. latency: resumes (failed last time: ValueError: no latency today)" in format_plan(plan).splitlines()
    assert _snapshot(folder) == before and no_step_runs == calls  # nothing written, nothing run
    fresh = plan_run(config, folder, fresh=True)
    assert not fresh.resumes and {s.status for s in fresh.steps} == {RUNS} and _snapshot(folder) == before


def test_check_refuses_what_the_run_refuses(tmp_path, no_step_runs):
    config_file, folder = _config_file(tmp_path), tmp_path / "run"
    run_pipeline(load_run_config(config_file), folder)
    before = _snapshot(folder)
    with pytest.raises(CareError, match=r"holds a run with other settings \(seed\)"):
        plan_run(load_run_config(config_file, ["seed=8"]), folder)
    with pytest.raises(CareError, match=r"--redo: unknown step\(s\) \['train'\]"):
        plan_run(load_run_config(config_file), folder, redo=["train"])
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(CareError, match="is not a care run folder"):
        plan_run(load_run_config(config_file), other)
    assert _snapshot(folder) == before


def test_a_missing_train_file_is_named_by_its_config_key(tmp_path, no_step_runs, monkeypatch, capsys):
    missing = tmp_path / "x" / "train.jsonl"
    config, folder = _config_file(tmp_path, train_file=str(missing)), tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["care", "run", str(config), "-o", str(folder), "--check"])
    with pytest.raises(SystemExit) as exit_:
        run_cli(app)
    assert exit_.value.code == USER_ERROR_EXIT and not folder.exists()
    assert capsys.readouterr().err == (
        f"error: inputs.train_file: {missing} not found; check the path (a relative path is read next to the run "
        "config, else from the current folder) or fix inputs.train_file in the run config\n")
    with pytest.raises(CareError) as run_error:  # the run itself says the same, before any step
        run_pipeline(load_run_config(config), folder)
    assert str(run_error.value).startswith(f"inputs.train_file: {missing} not found;") and no_step_runs == []


@pytest.mark.parametrize(("inputs", "message"), [
    ({"tasks": ["{beir}", "{tmp}/nowhere"]}, r"^inputs\.tasks\[1\]: unknown task '.*nowhere' \(and no such folder\)"),
    ({"alignment_queries": ["{tmp}/log.jsonl"]},
     r"^inputs\.alignment_queries\[0\]: .*log\.jsonl, line 1, field 'text'"),
    ({"corpus": "{tmp}/corpus.jsonl"}, r"^inputs\.corpus: .*corpus\.jsonl not found; check the path"),
    ({"raw_queries": "{tmp}"}, r"^inputs\.raw_queries: .* is a folder; name a file"),
])
def test_every_input_error_names_its_config_key(tmp_path, inputs, message):
    beir = write_beir_folder(tmp_path / "data")
    (tmp_path / "log.jsonl").write_text('{"id": "1", "text": " "}\n', encoding="utf-8")
    filled = json.loads(json.dumps(inputs).replace("{beir}", str(beir.folder)).replace("{tmp}", str(tmp_path)))
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps({**CONFIG, "inputs": {"train_file": str(beir.train_pos), "tasks": [str(beir.folder)],
                                                     **filled}}), encoding="utf-8")
    with pytest.raises((CareError, ValueError), match=message):
        plan_run(load_run_config(path), tmp_path / "run")
    assert not (tmp_path / "run").exists()
