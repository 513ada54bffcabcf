"""``care run`` / ``care demo`` when a step fails: one line on the terminal (what, where, the resume command),
the traceback in run.log, and on the terminal too only with --verbose."""

from __future__ import annotations

import json
import shlex

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from care.cli import app
from care.pipeline import run as pipeline
from care.pipeline.cli import demo_config_path, resume_command

THRESHOLDS = "curate.judge_thresholds={S: 0.5, A: 0.4, B: 0.35, C: 0.25}"  # a value the resume command must quote


@pytest.fixture
def flaky_curate(monkeypatch):
    """``curate`` fails the first time (a two-line message) and then succeeds at once."""
    calls = []

    def curate(ctx):
        calls.append("curate")
        if len(calls) == 1:
            raise ValueError("raw_queries.jsonl went missing\nwhile curating")
        return {}

    monkeypatch.setitem(pipeline.STEPS, "curate", curate)
    return calls


def _demo(folder, *extra: str) -> list[str]:
    return ["demo", "--output", str(folder), "--fresh", "--skip-e5", "--step", "curate", "--redo", "curate",
            "--set", THRESHOLDS, "--no-progress", *extra]


def test_a_failed_step_prints_one_line_and_the_resume_command(tmp_path, flaky_curate) -> None:
    folder = tmp_path / "run"
    result = CliRunner().invoke(app, _demo(folder))
    assert result.exit_code == 1
    resume = f"care demo --output {folder} --skip-e5 --step curate --set '{THRESHOLDS}' --no-progress"
    assert result.output.splitlines() == [
        f"error: step 1/1 curate failed after 0 s: ValueError: raw_queries.jsonl went missing while curating "
        f"(run folder {folder}, traceback in {folder / 'run.log'}); resume with: {resume}"]
    log = (folder / "run.log").read_text(encoding="utf-8")
    assert "step 1/1 curate failed after 0 s" in log and "Traceback (most recent call last)" in log
    assert 'raise ValueError("raw_queries.jsonl went missing' in log
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["steps"]["curate"]["status"] == "failed"

    resumed = CliRunner().invoke(app, shlex.split(resume)[1:])  # the printed command, as a shell would split it
    assert resumed.exit_code == 0, resumed.output
    assert "1 step(s) run" in resumed.output and flaky_curate == ["curate", "curate"]


@pytest.mark.parametrize("where", ["command", "global"])
def test_verbose_shows_the_traceback_too(tmp_path, flaky_curate, where) -> None:
    folder = tmp_path / "run"
    args = _demo(folder, "--verbose") if where == "command" else ["--verbose", *_demo(folder)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.output and "ValueError: raw_queries.jsonl" in result.output
    last = result.output.splitlines()[-1]
    assert last.startswith("error: step 1/1 curate failed") and "resume with: care " in last
    assert ("care --verbose demo" in last) == (where == "global")


def test_an_error_before_any_step_is_one_line(tmp_path) -> None:
    """A run folder holding something else: the user error reaches care's handler as it is (one line there)."""
    (tmp_path / "precious.txt").write_text("keep me", encoding="utf-8")
    result = CliRunner().invoke(app, ["demo", "--output", str(tmp_path), "--skip-e5", "--step", "curate"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "not a care run folder" in str(result.exception)


def _echo_app():
    """A command shaped like ``care run`` that prints its own resume command."""

    echo_app = typer.Typer()

    @echo_app.callback()
    def root(quiet: bool = typer.Option(False, "--quiet", "-q")) -> None:
        pass

    @echo_app.command("run")
    def run(ctx: typer.Context, config: str = typer.Argument(...), output: str = typer.Option("x", "--output", "-o"),
            set_: list[str] = typer.Option([], "--set"), fresh: bool = typer.Option(False, "--fresh"),
            redo: list[str] = typer.Option([], "--redo"), lora: bool = typer.Option(True, "--lora/--no-lora")) -> None:
        typer.echo(resume_command(ctx))

    return echo_app


ECHO_APP = _echo_app()


@settings(max_examples=60, deadline=None)
@given(config=st.text(min_size=1, max_size=20).filter(lambda t: not t.startswith("-") and "\x00" not in t),
       sets=st.lists(st.text(max_size=20).filter(lambda t: "\x00" not in t), max_size=3))
def test_the_resume_command_is_what_was_typed_without_fresh_and_redo(config, sets) -> None:
    args = ["-q", "run", "--fresh", "-o", "runs/a b", "--no-lora", "--redo", "report",
            *(w for value in sets for w in ("--set", value)), "--", config]
    result = CliRunner().invoke(ECHO_APP, args)
    assert result.exit_code == 0, result.output
    assert shlex.split(result.output) == ["care", "--quiet", "run", config, "--output", "runs/a b",
                                          *(w for value in sets for w in ("--set", value)), "--no-lora"]


@pytest.fixture
def torch_threads():
    """torch's thread count put back after the test (a run sets it for the whole process)."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("in_file", "flags", "in_force"), [
    (3, [], 3),  # the config's threads
    (3, ["--set", "threads=2"], 2),  # --set wins over the file
    (3, ["--set", "threads=2", "--threads", "1"], 1),  # --threads, given, wins over both
    (None, [], 0),  # nothing set: the library default
])
def test_threads_come_from_the_config_then_set_then_the_option(tmp_path, torch_threads, monkeypatch, in_file, flags,
                                                                in_force):
    import torch

    from ..beir_folder import write_beir_folder

    for name in list(pipeline.STEPS):
        monkeypatch.setitem(pipeline.STEPS, name, lambda ctx: {})
    beir = write_beir_folder(tmp_path)
    config = {"curate": {"encoder": "hashing"}, "models": {"references": {"BM25": "bm25"}}, "show_progress": False,
              "inputs": {"train_file": str(beir.train_pos), "tasks": [str(beir.folder)]},
              **({"threads": in_file} if in_file is not None else {})}
    (tmp_path / "run.yaml").write_text(json.dumps(config), encoding="utf-8")
    default = torch.get_num_threads()
    folder = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml"), "-o", str(folder), *flags])
    assert result.exit_code == 0, result.output
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["threads"] == in_force
    assert manifest["threads"] == torch.get_num_threads() == (in_force or default)


def test_a_bad_thread_count_names_the_option_or_the_field(tmp_path) -> None:
    result = CliRunner().invoke(app, ["run", str(tmp_path / "run.yaml"), "--threads", "-1"])
    assert result.exit_code == 2 and "Invalid value for '--threads'" in result.output  # before anything is read
    result = CliRunner().invoke(app, ["demo", "--skip-e5", "-o", str(tmp_path / "d"), "--set", "threads=-1"])
    assert str(result.exception) == (f"{demo_config_path(tiny=True)}: config field 'threads': must be >= 0 (torch threads; "
                                     "0: the library default), got -1 (set by the override threads=-1)")
    assert not (tmp_path / "d").exists()
