"""The paper's unanimous rule: a pair is a positive only when every judge gives a positive grade,
a negative only when every judge gives a negative grade; partial agreement is discarded.

Which grades count as positive / negative, and the qrels score a grade maps to, are configurable.
A unanimous positive gets the *lowest* mapped score among its judges (the grade all agree on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from care.config import Config
from care.errors import CareError

POSITIVE = "positive"
NEGATIVE = "negative"
GRADE_LETTERS = ("S", "A", "B", "C", "D")


@dataclass
class VotingConfig(Config):
    """Grade mapping for the unanimous rule.

    Attributes:
        positive_grades: grades that count as relevant (default S, A).
        negative_grades: grades that count as irrelevant (default C, D); other grades (B) are neither,
            so a pair with one B is discarded.
        scores: qrels score per grade (graded relevance; negatives are written with score 0).
    """

    positive_grades: tuple[str, ...] = ("S", "A")
    negative_grades: tuple[str, ...] = ("C", "D")
    scores: dict[str, int] = field(default_factory=lambda: {"S": 3, "A": 2, "B": 1, "C": 0, "D": 0})

    def __post_init__(self) -> None:
        self.positive_grades = tuple(self.positive_grades)
        self.negative_grades = tuple(self.negative_grades)
        for g in (*self.positive_grades, *self.negative_grades, *self.scores):
            if g not in GRADE_LETTERS:
                raise CareError(f"voting: unknown grade {g!r} (grades are {', '.join(GRADE_LETTERS)})")
        if set(self.positive_grades) & set(self.negative_grades):
            raise CareError("voting: a grade cannot be both positive and negative")
        missing = set(self.positive_grades) - set(self.scores)
        if missing:
            raise CareError(f"voting: scores missing for positive grades {sorted(missing)}")


def unanimous_label(grades: Sequence[str], config: VotingConfig) -> tuple[str | None, int]:
    """``(label, score)`` of one pair graded by every judge: ``("positive", min score)``,
    ``("negative", 0)``, or ``(None, 0)`` when the judges do not agree."""
    if not grades:
        return None, 0
    if all(g in config.positive_grades for g in grades):
        return POSITIVE, min(config.scores[g] for g in grades)
    if all(g in config.negative_grades for g in grades):
        return NEGATIVE, 0
    return None, 0
