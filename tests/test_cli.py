"""``care``'s entry point: any command's error is one line on stderr (its traceback only with ``care --verbose``)."""

from __future__ import annotations

import sys

import pytest

from care.cli import USER_ERROR_EXIT, UNEXPECTED_ERROR_EXIT, app, run_cli


def _care(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["care", *args])
    with pytest.raises(SystemExit) as info:
        run_cli(app)
    return info.value.code, capsys.readouterr().err


def test_a_user_error_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    code, err = _care(monkeypatch, capsys, "model", "info", str(tmp_path / "nothing"))
    assert code == USER_ERROR_EXIT
    assert err == f"error: {tmp_path / 'nothing'} is not a folder; pass a model folder written by `care model build`\n"
    code, err = _care(monkeypatch, capsys, "--verbose", "model", "info", str(tmp_path / "nothing"))
    assert code == USER_ERROR_EXIT and "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("error: ") and "is not a folder" in err.splitlines()[-1]


def test_an_unexpected_error_is_one_line_that_says_how_to_see_the_traceback(tmp_path, monkeypatch, capsys) -> None:
    def broken(path):
        raise RuntimeError("tensor sizes\ndo not match")

    monkeypatch.setattr("care.models.cli.describe", broken)
    code, err = _care(monkeypatch, capsys, "model", "info", str(tmp_path))
    assert code == UNEXPECTED_ERROR_EXIT
    assert err == ("error: unexpected RuntimeError: tensor sizes do not match "
                   "(rerun with care --verbose ... to see the traceback)\n")
    code, err = _care(monkeypatch, capsys, "--verbose", "model", "info", str(tmp_path))
    assert code == UNEXPECTED_ERROR_EXIT and "Traceback (most recent call last)" in err
    assert err.splitlines()[-1] == ("error: unexpected RuntimeError: tensor sizes do not match "
                                    "(the traceback is above)")


#: The module that defines each top-level command (a group: every subcommand of it).
COMMAND_OWNERS: dict[str, str] = {
    "bench": "care.bench.cli", "inspect-model": "care.encoders.cli", "model": "care.models.cli",
    "export-onnx": "care.models.cli", "index": "care.index.cli", "serve": "care.serve.cli",
    "curate": "care.curate.cli", "train": "care.train.cli", "pretrain": "care.pretrain.cli",
    "doctor": "care.doctor.cli", "run": "care.pipeline.cli", "demo": "care.pipeline.cli",
}


def _commands(command, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """``{command path: module of its function}`` below a click command."""
    out = {}
    for name, sub in command.commands.items():
        if hasattr(sub, "commands"):
            out.update(_commands(sub, (*prefix, name)))
        else:
            out[(*prefix, name)] = sub.callback.__module__
    return out


def test_every_command_is_defined_in_the_package_it_names() -> None:
    import typer.main

    commands = _commands(typer.main.get_command(app))
    assert {path[0] for path in commands} >= set(COMMAND_OWNERS)
    assert ("index", "build") in commands
    wrong = {" ".join(path): module for path, module in commands.items()
             if path[0] in COMMAND_OWNERS and module != COMMAND_OWNERS[path[0]]}
    assert wrong == {}
