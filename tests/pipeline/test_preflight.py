"""``care run`` reads every input before its first step: a bad line fails in seconds, naming file, line and
field, and no step starts."""

from __future__ import annotations

import hashlib
import json

import pytest

from care.data.errors import DataFormatError
from care.errors import CareError
from care.pipeline import run as pipeline
from care.pipeline.config import load_run_config
from care.pipeline.run import run_pipeline

from ..beir_folder import QRELS_HEADER, write_beir_folder

CONFIG = {"curate": {"encoder": "hashing"}, "models": {"query": "tiny", "document": "tiny", "references": {"BM25": "bm25"}},
          "show_progress": False}


def _config(tmp_path, train_file, task, **inputs):
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps({**CONFIG, "inputs": {"train_file": str(train_file), "tasks": [str(task)], **inputs}}),
                    encoding="utf-8")
    return load_run_config(path)


def _fails_before_any_step(config, folder, calls, message):
    with pytest.raises((DataFormatError, CareError), match=message):
        run_pipeline(config, folder)
    assert calls == []
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["steps"] == {}  # no step started


def test_qrels_naming_a_missing_document_fails_before_any_step(tmp_path, no_step_runs):
    beir = write_beir_folder(tmp_path)
    qrels = beir.folder / "qrels" / "test.tsv"
    qrels.write_text(QRELS_HEADER + "q1\td1\t1\nq2\td99\t1\n", encoding="utf-8")
    _fails_before_any_step(_config(tmp_path, beir.train_pos, beir.folder), tmp_path / "run", no_step_runs,
                           rf"{qrels}, line 3, field 'corpus-id': unknown corpus id 'd99'")


@pytest.mark.parametrize(("broken", "message"), [
    ("train", r"train_pos.jsonl, line 2, field 'pos': empty list"),
    ("corpus", r"beir/corpus.jsonl, line 3, field 'text': no visible text"),
    ("duplicate", r"beir/corpus.jsonl, line 2, field 'id': duplicate id 'd1' \(first seen on line 1\)"),
    ("split", r"no qrels for split 'train'.*its splits are: dev, test"),
    ("index corpus", r"other.jsonl, line 1, field 'id': missing field"),
    ("alignment queries", r"log.jsonl, line 2, field 'text'"),
])
def test_every_input_is_read_before_any_step(tmp_path, no_step_runs, broken, message):
    beir = write_beir_folder(tmp_path)
    inputs = {}
    if broken == "train":
        beir.train_pos.write_text('{"query": "头痛", "pos": "多休息"}\n{"query": "咳嗽", "pos": []}\n', encoding="utf-8")
    elif broken in ("corpus", "duplicate"):
        lines = beir.corpus.read_text(encoding="utf-8").splitlines()
        lines[2 if broken == "corpus" else 1] = json.dumps(
            {"_id": "d3", "title": "", "text": " "} if broken == "corpus" else {"_id": "d1", "text": "重复"})
        beir.corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif broken == "split":
        inputs["split"] = "train"
    elif broken == "alignment queries":
        log = tmp_path / "log.jsonl"
        log.write_text('{"id": "1", "text": "头痛怎么办"}\n{"id": "2", "text": "  "}\n', encoding="utf-8")
        inputs["alignment_queries"] = [str(log)]
    else:
        other = tmp_path / "other.jsonl"
        other.write_text('{"text": "没有编号"}\n', encoding="utf-8")
        inputs["corpus"] = str(other)
    _fails_before_any_step(_config(tmp_path, beir.train_pos, beir.folder, **inputs), tmp_path / "run", no_step_runs,
                           message)


def test_good_inputs_pass_and_the_steps_run(tmp_path, no_step_runs):
    beir = write_beir_folder(tmp_path)
    report = run_pipeline(_config(tmp_path, beir.train_positive, beir.folder), tmp_path / "run")
    assert no_step_runs == report.steps_run and "index" in no_step_runs


def test_input_files_are_every_file_the_run_reads_once(tmp_path):
    from care.pipeline.context import RunContext
    from care.pipeline.manifest import RunManifest
    from care.pipeline.preflight import input_files

    beir = write_beir_folder(tmp_path)
    config = _config(tmp_path, beir.train_pos, beir.folder, split="test", corpus=str(beir.corpus))
    files = input_files(RunContext(config, tmp_path / "run", RunManifest(tmp_path / "run", config.to_dict())))
    assert sorted(p.resolve() for p in files) == sorted(p.resolve() for p in (
        beir.train_pos, beir.queries, beir.folder / "qrels" / "test.tsv", beir.corpus))  # the corpus named twice: once


def test_a_resume_after_an_input_changed_is_refused_naming_the_file(tmp_path, no_step_runs, monkeypatch):
    beir = write_beir_folder(tmp_path)
    config, folder = _config(tmp_path, beir.train_positive, beir.folder), tmp_path / "run"

    def killed(ctx):
        raise KeyboardInterrupt

    monkeypatch.setitem(pipeline.STEPS, "evaluate", killed)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["inputs"][str(beir.corpus.resolve())] == hashlib.sha256(beir.corpus.read_bytes()).hexdigest()
    original = beir.corpus.read_bytes()
    beir.corpus.write_bytes(original + b"\n")  # one blank line more: the same documents, another file
    calls_before = list(no_step_runs)
    with pytest.raises(CareError, match=rf"{beir.corpus.resolve()} changed since the run .* read it: its steps so far "
                                        r"\(.*train_care done.*evaluate failed\).*Restore the file, or rerun with --fresh"):
        run_pipeline(config, folder)
    assert no_step_runs == calls_before  # nothing ran on the edited file
    monkeypatch.undo()
    for name in list(pipeline.STEPS):  # the fixture's recorders again, without the kill
        monkeypatch.setitem(pipeline.STEPS, name, lambda ctx, name=name: no_step_runs.append(name) or {})
    beir.corpus.write_bytes(original)  # restored: the run resumes where it stopped
    resumed = run_pipeline(config, folder)
    assert resumed.steps_run[0] == "evaluate" and "train_care" in resumed.steps_skipped
    beir.corpus.write_bytes(original + b"\n")
    fresh = run_pipeline(config, folder, fresh=True)  # --fresh starts over on the edited file
    assert fresh.steps_skipped == [] and "train_care" in fresh.steps_run


def test_a_manifest_written_before_inputs_were_recorded_resumes(tmp_path, no_step_runs):
    beir = write_beir_folder(tmp_path)
    config, folder = _config(tmp_path, beir.train_positive, beir.folder), tmp_path / "run"
    run_pipeline(config, folder)
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    del manifest["inputs"]
    manifest["steps"].pop("report")
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    assert run_pipeline(config, folder).steps_run == ["report"]
    assert json.loads(manifest_path.read_text(encoding="utf-8"))["inputs"]  # recorded from now on
