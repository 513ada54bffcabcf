"""Judge pairs with every judge and apply the unanimous rule (shared by build-benchmark,
build-train and audit)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.curate.judges.agreement import agreement_report
from care.curate.judges.base import Judge, JudgePair, Usage
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.runner import judge_pairs
from care.curate.judges.voting import NEGATIVE, POSITIVE, VotingConfig, unanimous_label
from care.data.text_rules import has_visible

logger = logging.getLogger(__name__)


@dataclass
class LabelResult:
    """Grades per judge, the unanimous labels and what judging cost.

    ``labels[(query_id, doc_id)] = (label, score)`` where label is ``"positive"``, ``"negative"`` or
    None (judges disagree); only pairs every judge graded appear. ``blank_pairs`` counts the pairs whose query or
    passage shows nothing (only whitespace or zero-width characters): never sent to a judge, never labelled.
    """

    grades: dict[str, dict[tuple[str, str], str]] = field(default_factory=dict)
    labels: dict[tuple[str, str], tuple[str | None, int]] = field(default_factory=dict)
    usage: dict[str, dict[str, float | int]] = field(default_factory=dict)
    usage_total: dict[str, dict[str, float | int]] = field(default_factory=dict)
    cached: dict[str, int] = field(default_factory=dict)
    blank_pairs: int = 0

    def count(self, label: str | None) -> int:
        return sum(1 for lab, _ in self.labels.values() if lab == label)

    def summary(self, voting: VotingConfig) -> dict[str, Any]:
        keys = list(self.labels)
        agreement = agreement_report({j: [g[k] for k in keys] for j, g in self.grades.items()}, voting)
        return {
            "pairs_labelled": len(keys),
            "positives": self.count(POSITIVE),
            "negatives": self.count(NEGATIVE),
            "discarded_disagreement": self.count(None),
            "blank_pairs_not_judged": self.blank_pairs,
            "agreement": agreement,
            "usage": self.usage,
            "usage_total": self.usage_total,
            "cached_pairs": self.cached,
        }


def total_usage_report(total: Usage) -> dict[str, float | int]:
    """A judge's usage over every run of a cache, with the requests whose replies were never recorded
    (``unrecorded``) and their likely cost (``unrecorded_cost_estimate``: the mean cost of a recorded
    reply times their number)."""
    per_call = total.cost_usd / total.calls if total.calls else 0.0
    return {**total.as_dict(), "unrecorded": total.unrecorded, "unrecorded_cost_estimate": total.unrecorded * per_call}


def label_pairs(judges: Sequence[Judge], pairs: Sequence[JudgePair], cache: JudgmentCache | None,
                voting: VotingConfig, *, show_progress: bool = True) -> LabelResult:
    """Run every judge over ``pairs`` (cached) and vote. Raises JudgeError if a judge fails on some pairs.

    A pair whose query or passage shows nothing is not judged (an LLM judge would be paid to grade an empty
    text); it is counted in ``blank_pairs`` and left unlabelled.
    """
    result = LabelResult()
    shown = [p for p in pairs if has_visible(p.query) and has_visible(p.passage)]
    if len(shown) < len(pairs):
        result.blank_pairs = len(pairs) - len(shown)
        queries = sorted({p.query_id for p in pairs if not has_visible(p.query)})
        logger.warning("%d pair(s) whose query or passage shows nothing (only whitespace or zero-width characters) "
                       "were not judged%s", result.blank_pairs,
                       f"; queries without visible text: {queries[:10]}" if queries else "")
        pairs = shown
    for judge in judges:
        run = judge_pairs(judge, pairs, cache, show_progress=show_progress)
        result.grades[judge.id] = run.grades
        result.usage[judge.id] = run.usage.as_dict()
        result.cached[judge.id] = run.cached
        logger.info("judge %s: %d judged, %d from cache, cost %.4f", judge.id, run.judged, run.cached, run.usage.cost_usd)
        if cache is not None:
            result.usage_total[judge.id] = total_usage_report(cache.usage(judge.id))
            lost = result.usage_total[judge.id]["unrecorded"]
            if lost:
                logger.warning("judge %s: %d request(s) of earlier runs were sent but their replies never recorded "
                               "(a killed run); a paid API has probably charged them (about %.4f)", judge.id, lost,
                               result.usage_total[judge.id]["unrecorded_cost_estimate"])
    for p in pairs:
        key = (p.query_id, p.doc_id)
        if key in result.labels:
            continue
        grades = [result.grades[j.id].get(key) for j in judges]
        if all(g is not None for g in grades):
            result.labels[key] = unanimous_label(grades, voting)
    return result


PAIR_FIELDS = ("query_id", "query", "doc_id", "passage")


def read_pairs(path: str | Path) -> list[JudgePair]:
    """Read ``{"query_id", "query", "doc_id", "passage"}`` JSONL rows; a query or passage that shows nothing is
    refused with its line (a judge would grade an empty text)."""
    from care.data.fields import require_document_text, require_id
    from care.data.io import iter_jsonl

    path = Path(path)
    pairs = []
    for line, row in iter_jsonl(path):
        pairs.append(JudgePair(require_id(row, "query_id", path, line), require_document_text(row, "query", path, line),
                               require_id(row, "doc_id", path, line),
                               require_document_text(row, "passage", path, line)))
    if not pairs:
        from care.data.errors import DataFormatError

        raise DataFormatError(path, "no pairs", hint='add {"query_id", "query", "doc_id", "passage"} lines')
    return pairs


def judge_file(pairs_path: str | Path, judges: Sequence[Judge], out_path: str | Path, *,
               cache: JudgmentCache | None, voting: VotingConfig, show_progress: bool = True) -> dict[str, Any]:
    """Judge a pairs file with every judge; write ``{"query_id", "doc_id", "grades": {judge: grade},
    "label", "score"}`` rows (atomically) and ``<out>.report.json``. Returns the report."""
    from care.data.io import write_json, write_jsonl

    pairs = read_pairs(pairs_path)
    result = label_pairs(judges, pairs, cache, voting, show_progress=show_progress)
    rows, seen = [], set()
    for p in pairs:
        key = (p.query_id, p.doc_id)
        if key not in result.labels or key in seen:
            continue
        seen.add(key)
        label, score = result.labels[key]
        rows.append({"query_id": p.query_id, "doc_id": p.doc_id,
                     "grades": {j.id: result.grades[j.id][key] for j in judges}, "label": label, "score": score})
    write_jsonl(out_path, rows)
    report = result.summary(voting)
    write_json(Path(str(out_path) + ".report.json"), report)
    return report
