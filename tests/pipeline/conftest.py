"""Shared fixtures of the pipeline tests."""

from __future__ import annotations

import pytest

from care.pipeline import run as pipeline

from .budget_run import curve, trained_care  # noqa: F401  (fixtures of the budget's and the served vocabulary's tests)


@pytest.fixture
def no_step_runs(monkeypatch) -> list[str]:
    """Every step of ``care run`` replaced by one that records its call; the list of calls, in order."""
    calls: list[str] = []
    for name in list(pipeline.STEPS):
        monkeypatch.setitem(pipeline.STEPS, name, lambda ctx, name=name: calls.append(name) or {})
    return calls
