"""``care.bench.reports.baselines``: ``reference_models.md`` from its record, and the sections an invocation keeps."""

from __future__ import annotations

from care.bench.reports.baselines import EXPERIMENT, NAME, previous_report, to_markdown
from care.bench.reports.paths import RESULTS


def test_the_committed_record_renders_the_committed_markdown():
    report = previous_report(RESULTS)
    assert {"demo", "toyhom", "command", "created", "machine"} <= set(report)
    expected = (RESULTS / EXPERIMENT / f"{NAME}.md").read_text(encoding="utf-8")
    assert to_markdown(report) == expected


def test_without_a_record_the_report_starts_empty_and_says_what_was_skipped(tmp_path):
    report = previous_report(tmp_path)
    assert report == {}
    md = to_markdown({**report, "command": "x", "created": "today", "machine": "m",
                      "toyhom": {"skipped": "no dev set"}})
    assert "Skipped: no dev set" in md and "Skipped: not run" in md  # the demo and overhead sections were not run
