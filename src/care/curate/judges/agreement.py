"""Inter-judge agreement: Fleiss' kappa over all judges and Cohen's kappa for each pair of judges
(statsmodels and scikit-learn implementations), on the five grades and on the binary
relevant / not-relevant split of the voting configuration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from care.curate.judges.voting import GRADE_LETTERS, VotingConfig


def fleiss_kappa(ratings: Sequence[Sequence[str]], categories: Sequence[str] = GRADE_LETTERS) -> float:
    """Fleiss' kappa of ``ratings[item][rater]`` (every item rated by the same number of raters).

    Returns NaN when there are fewer than two raters or no item.
    """
    from statsmodels.stats.inter_rater import fleiss_kappa as _fleiss

    if not ratings or len(ratings[0]) < 2:
        return float("nan")
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(ratings), len(categories)), dtype=np.int64)
    for row, item in enumerate(ratings):
        for grade in item:
            table[row, index[grade]] += 1
    return float(_fleiss(table, method="fleiss"))


def cohen_kappa(a: Sequence[str], b: Sequence[str], *, weights: str | None = None,
                labels: Sequence[str] = GRADE_LETTERS) -> float:
    """Cohen's kappa between two raters (``weights="linear"``/``"quadratic"`` for ordinal grades)."""
    from sklearn.metrics import cohen_kappa_score

    if not a:
        return float("nan")
    present = [lab for lab in labels if lab in set(a) | set(b)]
    if len(present) < 2:  # both raters used one identical category everywhere: perfect agreement
        return 1.0 if list(a) == list(b) else float("nan")
    return float(cohen_kappa_score(list(a), list(b), weights=weights, labels=present))


def _json_number(value: float) -> float | None:
    """NaN (undefined kappa: one judge, or no variation) becomes None so reports stay valid JSON."""
    return None if value != value else value


def agreement_report(grades: Mapping[str, Sequence[str]], voting: VotingConfig) -> dict[str, Any]:
    """Agreement statistics for judges that graded the same pairs in the same order.

    Args:
        grades: ``{judge_id: [grade per pair]}``, all lists aligned.
    Returns (undefined statistics are None):
        ``{"pairs", "judges", "fleiss_kappa", "fleiss_kappa_binary", "cohen_kappa": {"a|b": {...}},
        "grade_distribution": {judge: {grade: count}}}``.
    """
    judges = list(grades)
    n = len(next(iter(grades.values()))) if grades else 0
    items = [[grades[j][i] for j in judges] for i in range(n)]
    pos = set(voting.positive_grades)
    binary = [["P" if g in pos else "N" for g in item] for item in items]
    pairwise = {}
    for a, b in combinations(judges, 2):
        pairwise[f"{a}|{b}"] = {
            "kappa": _json_number(cohen_kappa(grades[a], grades[b])),
            "kappa_linear": _json_number(cohen_kappa(grades[a], grades[b], weights="linear")),
            "kappa_binary": _json_number(cohen_kappa(["P" if g in pos else "N" for g in grades[a]],
                                                     ["P" if g in pos else "N" for g in grades[b]], labels=("P", "N"))),
            "exact_agreement": float(np.mean([x == y for x, y in zip(grades[a], grades[b])])) if n else None,
        }
    return {
        "pairs": n,
        "judges": judges,
        "fleiss_kappa": _json_number(fleiss_kappa(items)),
        "fleiss_kappa_binary": _json_number(fleiss_kappa(binary, categories=("P", "N"))),
        "cohen_kappa": pairwise,
        "grade_distribution": {j: {g: int(sum(x == g for x in grades[j])) for g in GRADE_LETTERS} for j in judges},
    }
