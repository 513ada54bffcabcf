"""Fixtures shared by every test folder."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def module_scratch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder for one module's shared, disk-heavy fixtures (whole runs with e5-sized models).

    Yields a fresh folder under pytest's base temp. When the module's tests end it is removed unless a test
    failed meanwhile (then it stays for debugging, under pytest's retention rules). Module-scoped folders from
    ``tmp_path_factory`` otherwise live until the session ends, and a full run's sum (several GB) has filled
    a CI disk.
    """
    failures_before = request.session.testsfailed
    folder = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    yield folder
    if request.session.testsfailed == failures_before:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _care_checkout_reads_as_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``care run`` refuses a checkout of care with uncommitted changes (``--allow-dirty``); the tests run it from
    whatever checkout holds them, edited or not, so for them care's own checkout (``code_state()`` without a root)
    reads as its commit. Repositories the tests make (``code_state(root)``) and the refusal itself
    (``tests/pipeline/test_manifest.py``, which sets the state it tests) are unaffected."""
    from care.bench import record
    from care.bench.record import CodeState

    real = record.code_state

    def committed(root=None):
        state = real(root)
        return state if root is not None else CodeState(state.commit.removesuffix("+dirty"))

    monkeypatch.setattr(record, "code_state", committed)
