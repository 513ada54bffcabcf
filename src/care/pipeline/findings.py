"""What a run found, in the few sentences its report leads with (issue 63): CARE's share of symmetric large's score
on the main task's test split, its query speed-up over symmetric large in the latency step's one engine, which model
the index serves and why, and — when ``recipes.care.query_speedup`` picked the query tower — the depth curve the
budget measured and its pick.

:func:`findings_lines` reads the report's rows (:func:`care.pipeline.report.results_rows`), the latency record
(``eval/latency.json``, :mod:`care.pipeline.latency`), the budget's choice (the ``train_care`` step's
``query_budget`` output) and the index step's outputs; a part whose inputs are missing (no CARE, no symmetric large,
no speed-up, no budget, no index) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Digits of a score in the findings (as the table prints them).
SCORE_DIGITS = 4
PERCENT = 100.0


def _score(rows: Sequence[Mapping[str, Any]], label: str | None, task: str) -> float | None:
    row = next((r for r in rows if r["model"] == label), None)
    return None if row is None else row["scores"].get(task)


def quality_line(rows: Sequence[Mapping[str, Any]], care: str | None, reference: str | None, task: str, metric: str,
                 latency: Mapping[str, Any] | None, rivals: Sequence[str] = ()) -> str | None:
    """``CARE scores 0.8580 ndcg_at_10 on T (test): 99.4 % of symmetric large (0.8630), its query side 5.12× faster
    than symmetric large's (ONNX int8 ...); above e5 (zero-shot) (0.8260).`` — None without both rows' scores.
    ``rivals``: other rows CARE is compared with (the dense references)."""
    care_score, reference_score = _score(rows, care, task), _score(rows, reference, task)
    if care_score is None or reference_score is None or reference_score <= 0:
        return None
    line = (f"{care} scores {care_score:.{SCORE_DIGITS}f} {metric} on {task} (test): "
            f"{PERCENT * care_score / reference_score:.1f} % of {reference} ({reference_score:.{SCORE_DIGITS}f})")
    speedup = (latency or {}).get("speedups", {}).get(care)
    if speedup is not None:
        line += (f", its query side {speedup:.2f}× faster than {reference}'s "
                 f"({latency.get('engine_description', latency.get('engine'))}, timed side by side)")
    compared = [(label, score) for label in rivals if (score := _score(rows, label, task)) is not None]
    if compared:
        line += "; " + ", ".join(f"{'above' if care_score > score else 'below'} {label} ({score:.{SCORE_DIGITS}f})"
                                 for label, score in compared)
    return line + "."


def index_line(index: Mapping[str, Any] | None) -> str | None:
    """``The index serves CARE: the best trained model on validation.`` — None when no index was built."""
    if not index:
        return None
    why = index.get("chosen_by") or "chosen by the index step"
    line = f"The index serves {index['label']}: {why}"
    if index.get("care_alternative"):
        line += f" ({index['care_alternative']})"
    return line + "."


def budget_line(budget: Mapping[str, Any] | None, care: str | None, latency: Mapping[str, Any] | None) -> str | None:
    """The budget's pick and the depth curve it measured before training (and what the trained tower timed in the
    latency step, when it did); None without a budget."""
    if not budget:
        return None
    from care.train.recipes.budget_tower import format_speedups

    speedups = {int(d): float(v) for d, v in budget["speedups"].items()}
    line = (f"The query-latency budget of {budget['budget']:g}× picked `{budget['query_spec']}` "
            f"({budget['depth']} of {budget['layers']} layers, {speedups[budget['depth']]:.2f}× faster than the "
            f"document model's query side), the deepest cut that fast; the depth curve it measured "
            f"({budget['engine']}): {format_speedups(speedups)}")
    measured = (latency or {}).get("speedups", {}).get(care)
    if measured is not None:
        line += f". Trained, {care}'s query side timed {measured:.2f}× faster than {latency.get('reference')}'s here"
    return line + "."


def findings_lines(rows: Sequence[Mapping[str, Any]], *, care: str | None, reference: str | None, task: str,
                   metric: str, latency: Mapping[str, Any] | None, budget: Mapping[str, Any] | None,
                   index: Mapping[str, Any] | None, rivals: Sequence[str] = ()) -> list[str]:
    """The report's lead: ``**What this run found.**`` and the sentences above, then a blank line; ``[]`` when
    there is nothing to say.

    Args:
        rows: the report's rows (``model``, ``scores`` per task).
        care / reference: the labels of CARE (``recipes.care.labels.stage2``) and symmetric large (``init_document``).
        task / metric: the main task's name and main score.
        latency: ``eval/latency.json`` (``speedups``, ``engine_description``, ``reference``), or None.
        budget: the budget's choice (:meth:`care.train.recipes.budget_tower.QueryTowerChoice.to_dict`), or None.
        index: the index step's outputs, or None.
        rivals: rows CARE's score is also compared with (the dense reference models: e5 zero-shot).
    """
    found = [line for line in (quality_line(rows, care, reference, task, metric, latency, rivals), index_line(index),
                               budget_line(budget, care, latency)) if line]
    return ["**What this run found.** " + " ".join(found), ""] if found else []
