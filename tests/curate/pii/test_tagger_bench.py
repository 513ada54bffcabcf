"""``care.curate.pii.tagger_bench`` and ``tagger_report``: a tagger scored on two seeds' lines, its record and report."""

from __future__ import annotations

import pytest

from care.curate.pii.clinical import NameGuard, load_clinical_lexicon
from care.curate.pii.eval_set import generate_eval_set
from care.curate.pii.tagger_bench import EXPERIMENT, pick, pii_record, run_taggers
from care.curate.pii.tagger_report import markdown

pytest.importorskip("jieba")
LINES = 12


def test_a_tagger_is_scored_pooled_and_per_seed_and_reported():
    sets = {17: generate_eval_set(LINES, seed=17), 2026: generate_eval_set(LINES, seed=2026)}
    guard = NameGuard(load_clinical_lexicon())
    results, skipped = run_taggers(["jieba"], sets, [], guard)
    assert skipped == {} and set(results) == {"jieba"}
    run = results["jieba"]
    assert run["texts"] == 2 * LINES and set(run["per_seed"]) == {17, 2026} and run["real"] is None
    assert run["pooled"].removed["STRUCTURED"].total == sum(
        s.removed["STRUCTURED"].total for s in run["per_seed"].values())  # pooled = the seeds' counts added
    winner, reported = pick(results)
    assert winner == reported == "jieba"
    record = pii_record(results, skipped, {}, seeds=[17, 2026], lines=LINES, genre_texts=0, real=[], source="",
                        guard=guard)
    assert record.experiment == EXPERIMENT and record.name == "pii" and record.config["reported_tagger"] == "jieba"
    assert set(record.scores["jieba"]) == {"pooled", "seed_17", "seed_2026"}
    assert record.latencies["jieba"]["eval_set"]["texts"] == 2 * LINES
    md = markdown(results, winner, reported, [17, 2026], LINES, skipped, "", None)
    assert md.startswith(f"# Anonymiser on the labelled PII set ({LINES} lines per seed, seeds 17, 2026)")
    assert "| jieba |" in md and "not run (no dev set)" in md
