"""Synonym STS pairs follow the paper's recipe and pass its checks."""

from __future__ import annotations

import random
from collections import Counter

from care.demo.build import DemoBundle
from care.demo.config import DemoConfig
from care.demo.content.schema import SynonymGroup
from care.demo.sts import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, compose_sts_pairs, passes_checks


def test_passes_checks_hand_cases() -> None:
    seed = "心梗有哪些早期表现？"  # 10 characters: 7..13 allowed at ±30%
    assert passes_checks(seed, "心肌梗死有哪些早期表现？", "心肌梗死", 0.3)  # 12 characters
    assert not passes_checks(seed, "心肌梗死有哪些早期表现？", "心肌梗塞", 0.3)  # replacement missing
    assert not passes_checks(seed, "冠状动脉粥样硬化性心脏病有哪些早期表现？", "冠状动脉粥样硬化性心脏病", 0.3)


def test_pairs_pass_the_paper_checks(bundle: DemoBundle) -> None:
    tol = bundle.config.sts_length_tolerance
    for pair in bundle.sts:
        assert pair.replacement in pair.sentence2
        assert abs(len(pair.sentence2) - len(pair.sentence1)) <= tol * len(pair.sentence1)
        assert pair.term in pair.sentence1
        group = bundle.lexicon.group_of(pair.term)
        assert group is not None and pair.replacement in group.terms


def test_each_seed_gives_one_pair_of_each_kind(bundle: DemoBundle) -> None:
    kinds = Counter(p.kind for p in bundle.sts)
    assert kinds[POSITIVE] == kinds[HARD_NEGATIVE] == kinds[EASY_NEGATIVE] > 60
    for pair in bundle.sts:
        if pair.kind == POSITIVE:
            # same question, synonym swapped: replacing the synonym back gives the seed
            assert pair.replacement != pair.term
            assert pair.sentence2.replace(pair.replacement, pair.term, 1) == pair.sentence1
            assert pair.score == 1.0
        elif pair.kind == HARD_NEGATIVE:
            assert pair.replacement != pair.term and pair.score == 0.0
            assert pair.sentence2.replace(pair.replacement, pair.term, 1) != pair.sentence1
        else:
            assert pair.replacement == pair.term and pair.sentence2 != pair.sentence1 and pair.score == 0.0


def test_groups_whose_terms_differ_too_much_in_length_are_skipped() -> None:
    group = SynonymGroup(("冠心病", "冠状动脉粥样硬化性心脏病"), "disease")
    assert compose_sts_pairs([group], random.Random(0), DemoConfig()) == []
    ok = SynonymGroup(("心梗", "心肌梗死"), "disease")
    assert len(compose_sts_pairs([ok], random.Random(0), DemoConfig())) == 3
