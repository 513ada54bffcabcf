"""Shared fixtures of the pipeline tests."""

from __future__ import annotations

import pytest

from care.pipeline import run as pipeline


@pytest.fixture
def no_step_runs(monkeypatch) -> list[str]:
    """Every step of ``care run`` replaced by one that records its call; the list of calls, in order."""
    calls: list[str] = []
    for name in list(pipeline.STEPS):
        monkeypatch.setitem(pipeline.STEPS, name, lambda ctx, name=name: calls.append(name) or {})
    return calls
