"""The streaming checkpoint: a resume continues where the crash left off, and is refused when an input changed."""

from __future__ import annotations

import json

import pytest

from care.curate.checkpoint import StreamCheckpoint
from care.errors import CareError


def _interrupted(tmp_path, settings=None):
    """A run over in.jsonl that finished its first two lines, then stopped."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "胃痛"}\n{"text": "头痛"}\n{"text": "咳嗽"}\n', encoding="utf-8")
    checkpoint = StreamCheckpoint(tmp_path / "out.jsonl", settings or {"step": "test"}, inputs=[source])
    checkpoint.resume()
    checkpoint.append([{"text": "胃痛"}, {"text": "头痛"}], lines_done=2, state={"kept": 2})
    return source


def test_resume_continues_after_the_finished_lines(tmp_path) -> None:
    source = _interrupted(tmp_path)
    again = StreamCheckpoint(tmp_path / "out.jsonl", {"step": "test"}, inputs=[source])
    progress = again.resume()
    assert (progress.lines_done, progress.state) == (2, {"kept": 2})
    again.append([{"text": "咳嗽"}], lines_done=3)
    again.finish()
    assert [json.loads(line)["text"] for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()] \
        == ["胃痛", "头痛", "咳嗽"]
    assert not (tmp_path / "out.jsonl.progress.json").exists()


def test_an_input_edited_between_runs_is_refused_with_the_file_named(tmp_path) -> None:
    source = _interrupted(tmp_path)
    source.write_text('{"text": "发热"}\n{"text": "头痛"}\n{"text": "咳嗽"}\n', encoding="utf-8")
    with pytest.raises(CareError, match=r"in\.jsonl changed since the interrupted run.*2 input lines.*to start over"):
        StreamCheckpoint(tmp_path / "out.jsonl", {"step": "test"}, inputs=[source]).resume()
    # nothing was truncated or rewritten by the refused resume
    assert (tmp_path / "out.jsonl.partial").read_text(encoding="utf-8").count("\n") == 2


def test_other_settings_are_refused_before_the_inputs_are_compared(tmp_path) -> None:
    source = _interrupted(tmp_path)
    with pytest.raises(CareError, match="different settings"):
        StreamCheckpoint(tmp_path / "out.jsonl", {"step": "other"}, inputs=[source]).resume()


def test_a_progress_file_from_before_inputs_were_recorded_still_resumes(tmp_path) -> None:
    source = _interrupted(tmp_path)
    progress_path = tmp_path / "out.jsonl.progress.json"
    saved = json.loads(progress_path.read_text(encoding="utf-8"))
    del saved["inputs"]
    progress_path.write_text(json.dumps(saved), encoding="utf-8")
    assert StreamCheckpoint(tmp_path / "out.jsonl", {"step": "test"}, inputs=[source]).resume().lines_done == 2


def test_a_missing_input_is_named_before_any_checkpoint_file_is_made(tmp_path) -> None:
    from care.data.errors import DataFormatError

    with pytest.raises(DataFormatError, match=r"nowhere\.jsonl"):
        StreamCheckpoint(tmp_path / "out" / "kept.jsonl", {"step": "test"}, inputs=[tmp_path / "nowhere.jsonl"]).resume()
    assert not (tmp_path / "out").exists()
