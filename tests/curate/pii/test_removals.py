"""Verdicts on what the anonymiser removed from real text, and their counts per 1,000 texts, by hand."""

from __future__ import annotations

import pytest

from care.curate.pii.clinical import ClinicalLexicon, NameGuard
from care.curate.pii.removals import UNJUDGED, Removal, judge_removals, summarise
from care.curate.pii.rules import Span

GUARD = NameGuard(ClinicalLexicon(frozenset({"罗布麻"})), symptom_chars=frozenset())


def test_verdicts():
    text = "除了罗布麻，卫多锻练，找李建国，电话13812345678"
    spans = [Span(2, 5, "NAME", "罗布麻"), Span(6, 8, "NAME", "卫多"), Span(12, 15, "NAME", "李建国"),
             Span(18, 29, "PHONE", "13812345678")]
    judged = {("d1", "卫多"): (False, "a garbled word")}
    removals = judge_removals("d1", text, spans, GUARD, judged)
    assert [(r.verdict, r.spurious) for r in removals] == [
        ("clinical term 罗布麻", True), ("judged: a garbled word", True), (UNJUDGED, None), (UNJUDGED, None)]
    # a person's judgement that it is personal data
    removals = judge_removals("d1", text, spans[2:3], GUARD, {("d1", "李建国"): (True, "the patient")})
    assert removals[0].spurious is False and removals[0].as_dict() == {
        "id": "d1", "type": "NAME", "text": "李建国", "start": 12, "verdict": "judged: the patient", "spurious": False}


def test_counts_per_1000_texts():
    def removal(kind: str, spurious: bool | None) -> Removal:
        return Removal("d", kind, "x", 0, "v", spurious)

    summary = summarise([removal("NAME", True), removal("NAME", True), removal("NAME", None),
                         removal("PHONE", False)], texts=2000)
    assert (summary.removed, summary.spurious, summary.unjudged) == (4, 2, 1)
    assert summary.by_type == {"NAME": 3, "PHONE": 1}
    assert summary.spurious_per_1000 == pytest.approx(1.0)
    assert not summary.meets_target  # 1.5 per 1,000 if the unjudged one is spurious too
    figures = summary.as_dict()
    assert figures["removed_per_1000"] == 2.0 and figures["unjudged_per_1000"] == 0.5
    assert summarise([removal("NAME", True)], texts=1000).meets_target
    assert summarise([], texts=0).spurious_per_1000 == 0.0
