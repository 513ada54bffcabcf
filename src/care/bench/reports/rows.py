"""Row helpers shared by the tables: the scores of the first of several labels a record has."""

from __future__ import annotations

from collections.abc import Sequence


def first(scores: dict, labels: Sequence[str]) -> dict | None:
    """The scores of the first of ``labels`` a record has (row labels changed between script versions)."""
    return next((scores[label] for label in labels if label in scores), None)
