"""Shared fixtures of the anonymiser tests: the anonymiser as it ships and one without its clinical-term guard (to
show that a guarded sentence would otherwise lose the word)."""

from __future__ import annotations

import pytest

from care.curate.pii.anonymiser import Anonymiser, AnonymiserConfig


@pytest.fixture(scope="module")
def protected() -> Anonymiser:
    return Anonymiser()


@pytest.fixture(scope="module")
def unprotected() -> Anonymiser:
    return Anonymiser(AnonymiserConfig(clinical_terms=False))
