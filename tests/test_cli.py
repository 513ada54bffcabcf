"""``care``'s entry point: any command's error is one line on stderr (its traceback only with ``care --verbose``)."""

from __future__ import annotations

import sys

import pytest

from care.cli import UNEXPECTED_ERROR_EXIT, USER_ERROR_EXIT, app, run_cli


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
