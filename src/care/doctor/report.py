"""The doctor's output: a rich table for people, JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Sequence

from care.doctor.result import CheckResult, core_ok

STATUS_STYLE: dict[str, str] = {"ok": "green", "warn": "yellow", "missing": "bold red"}


def to_json(results: Sequence[CheckResult]) -> str:
    """``{"core_ok": bool, "counts": {...}, "checks": [{check, status, detail, fix, core}, ...]}``."""
    counts = {s: sum(r.status == s for r in results) for s in STATUS_STYLE}
    return json.dumps({"core_ok": core_ok(results), "counts": counts, "checks": [r.to_dict() for r in results]},
                      ensure_ascii=False, indent=2)


def render_table(results: Sequence[CheckResult]):  # -> rich.table.Table
    """A rich table with the columns check, status, detail, fix (core rows marked with *)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="care doctor", show_lines=False)
    for column, kwargs in (("check", {"no_wrap": True}), ("status", {"no_wrap": True}),
                           ("detail", {"overflow": "fold", "ratio": 3}), ("fix", {"overflow": "fold", "ratio": 2})):
        table.add_column(column, **kwargs)
    for r in results:
        style = STATUS_STYLE[r.status]
        table.add_row(escape(r.check + (" *" if r.core else "")), f"[{style}]{r.status}[/{style}]", escape(r.detail), escape(r.fix))
    return table


def summary_line(results: Sequence[CheckResult]) -> str:
    """One closing sentence: is the core fine, and how many warnings."""
    warns = sum(r.status == "warn" for r in results)
    missing = [r.check for r in results if r.blocking]
    if missing:
        return f"core requirement(s) missing: {', '.join(missing)} — fix them and rerun 'care doctor' (* = core)"
    return f"core OK; {warns} warning(s) about optional features (* = core)"
