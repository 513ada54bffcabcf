"""Markdown tables of results: one row per task, one column per model, the main score per cell."""

from __future__ import annotations

from collections.abc import Sequence

from care.bench.result import TaskResult

SCORE_DIGITS = 4


def _fmt(value: float) -> str:
    return f"{value:.{SCORE_DIGITS}f}"


def results_table(results: Sequence[TaskResult]) -> str:
    """Main-score table: ``| task | type | metric | model A | model B |``, then a details table."""
    models = list(dict.fromkeys(r.model for r in results))
    tasks = list(dict.fromkeys(r.task for r in results))
    by_key = {(r.task, r.model): r for r in results}
    lines = ["| task | type | metric | " + " | ".join(models) + " |", "|---|---|---|" + "---|" * len(models)]
    for task in tasks:
        first = next(r for r in results if r.task == task)
        cells = [_fmt(by_key[(task, m)].main_value) if (task, m) in by_key else "–" for m in models]
        lines.append(f"| {task} | {first.task_type} | {first.main_score} | " + " | ".join(cells) + " |")
    lines += ["", "| task | model | scores | encode q (s) | encode d (s) | total (s) | outside encoding |", "|---|---|---|---|---|---|---|"]
    for r in results:
        scores = ", ".join(f"{k}={_fmt(v)}" for k, v in r.scores.items())
        t = r.timings
        lines.append(
            f"| {r.task} | {r.model} | {scores} | {t.get('encode_queries_s', 0):.2f} | {t.get('encode_documents_s', 0):.2f} "
            f"| {t.get('total_s', 0):.2f} | {t.get('outside_encoding_share', 0):.1%} |"
        )
    return "\n".join(lines) + "\n"
