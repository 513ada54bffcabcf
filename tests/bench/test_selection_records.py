"""Every record under ``benchmarks/results/`` holds the selection protocol (:mod:`care.bench.selection`): a record
that chose a setting says on which split, and one scored on test says so (the mark every table then shows); a
record that reports a setting chosen elsewhere cannot launder a test choice as a validation one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from care.bench.selection import TEST, TEST_MARK, VALIDATION, read_selections

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
#: Scripts that choose a setting by a score: each of their records must keep a selection block.
SELECTING_SCRIPTS: tuple[str, ...] = ("bench_stage1_probe", "e5_student_starts", "tune_care_tiny", "static_care_screen")
#: A record named for the split it scored (``stage1_probe_test_...``, ``test_seed0``, ``validation_...``).
SPLIT_IN_NAME = re.compile(r"(?:^|_)(test|validation)(?:_|$)")
RECORDS = sorted(p for p in RESULTS.glob("*/*.json") if '"experiment"' in p.read_text(encoding="utf-8")[:200])


def _record(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def scored_split(record: dict) -> str | None:
    """The split a record scored: its config's ``split``, else the one its name gives."""
    split = record["config"].get("split")
    if split in (TEST, VALIDATION):
        return split
    found = SPLIT_IN_NAME.search(record["name"])
    return found.group(1) if found else None


def chose_something(record: dict) -> bool:
    return any(re.search(rf"\b{script}\b", record["command"]) for script in SELECTING_SCRIPTS)


def test_the_records_are_found():
    assert len(RECORDS) > 50 and any(p.parent.name == "real_weights" for p in RECORDS)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_record_that_chose_a_setting_says_on_which_split_and_test_is_marked(path):
    record = _record(path)
    selections = read_selections(record["extra"], str(path))  # a malformed block fails here
    if chose_something(record):
        own = [s for s in selections if not s.record]
        assert own, f"{path}: {record['command']!r} chooses a setting but keeps no extra.selection of its own"
        split = scored_split(record)
        if split == TEST:  # scored on test: each of its choices must say so, and so be marked in the tables
            assert all(s.selected_on == TEST for s in own), f"{path}: scored on test, a selection says otherwise"
    for selection in selections:
        assert selection.setting and selection.chosen
        if selection.selected_on == TEST and selection.rows:
            missing = [r for r in selection.rows if r not in record["scores"]]
            assert not missing, f"{path}: selection {selection.setting!r} marks rows it does not hold: {missing}"


def _chooser(reference: str) -> Path | None:
    """The record a selection names as the one that chose (``<experiment>/<name>``), when it is one of ours."""
    path = RESULTS / f"{reference}.json"
    return path if re.fullmatch(r"[\w.-]+/[\w.-]+", reference) and path.is_file() else None


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_setting_chosen_elsewhere_keeps_the_split_it_was_chosen_on(path):
    for selection in read_selections(_record(path)["extra"], str(path)):
        chooser = _chooser(selection.record) if selection.record else None
        if chooser is None:
            continue
        theirs = read_selections(_record(chooser)["extra"], str(chooser))
        match = [s for s in theirs if s.setting == selection.setting and not s.record]
        assert match, f"{path}: {selection.setting!r} names {selection.record} as its chooser, which does not choose it"
        assert {s.selected_on for s in match} == {selection.selected_on}, (
            f"{path}: {selection.setting!r} says {selection.selected_on}, its chooser {selection.record} says "
            f"{sorted({s.selected_on for s in match})}")


def test_the_tables_mark_what_was_chosen_on_test():
    """The generated tables carry the mark where the records' test selections touch a row (the README's frontier
    and transfer tables, the docs' real-weight tables)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    frontier = readme.split("<!-- results:frontier-table -->")[1].split("<!-- /results:frontier-table -->")[0]
    rich = next(line for line in frontier.splitlines() if line.startswith("| 1 layer [rich-lr2.4e-3]"))
    assert TEST_MARK in rich and "98.2, 98.2, 96.4" in rich  # chosen on test; the per-seed ratios beside the mean
    transfer = readme.split("<!-- results:transfer-table -->")[1].split("<!-- /results:transfer-table -->")[0]
    care = next(line for line in transfer.splitlines() if line.startswith("| **CARE**"))
    toyhom, kuake = care.split("|")[2:4]
    assert TEST_MARK in toyhom and TEST_MARK not in kuake  # KUAKE-QTR chose nothing
