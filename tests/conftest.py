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
