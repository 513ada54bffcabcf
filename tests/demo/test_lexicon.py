"""The synonym dictionary and the longest-match swapper."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from care.demo.content import CONDITIONS, PROTECTED_PHRASES, SYNONYM_GROUPS
from care.demo.content.schema import SynonymGroup
from care.demo.lexicon import SynonymLexicon
from care.errors import CareError


@pytest.fixture(scope="module")
def lexicon() -> SynonymLexicon:
    return SynonymLexicon(SYNONYM_GROUPS, PROTECTED_PHRASES)


def test_no_term_is_in_two_groups() -> None:
    counts = Counter(term for group in SYNONYM_GROUPS for term in group.terms)
    assert [t for t, n in counts.items() if n > 1] == []
    assert len(SYNONYM_GROUPS) >= 40


def test_the_issue_examples_are_in_the_dictionary(lexicon: SynonymLexicon) -> None:
    assert lexicon.group_of("小苏打") is lexicon.group_of("碳酸氢钠") is not None
    assert lexicon.group_of("心梗") is lexicon.group_of("心肌梗死") is not None
    assert "扑热息痛" in lexicon.surface_forms("对乙酰氨基酚", "document")


def test_a_term_in_two_groups_is_rejected() -> None:
    groups = [SynonymGroup(("心梗", "心肌梗死"), "disease"), SynonymGroup(("心梗", "心绞痛"), "disease")]
    with pytest.raises(CareError, match="'心梗' is in two synonym groups"):
        SynonymLexicon(groups)


def test_bad_groups_are_rejected() -> None:
    with pytest.raises(CareError, match="at least two"):
        SynonymLexicon([SynonymGroup(("心梗", "心梗"), "disease")])
    with pytest.raises(CareError, match="not its terms"):
        SynonymLexicon([SynonymGroup(("心梗", "心肌梗死"), "disease", query_only=("MI",))])
    with pytest.raises(CareError, match="every term is query_only"):
        SynonymLexicon([SynonymGroup(("心梗", "心肌梗死"), "disease", query_only=("心梗", "心肌梗死"))])


def test_longest_match_wins(lexicon: SynonymLexicon) -> None:
    assert lexicon.find_terms("查糖化血红蛋白和血红蛋白") == ["糖化血红蛋白", "血红蛋白"]
    assert lexicon.find_terms("脑梗死后服用阿司匹林") == ["脑梗死", "阿司匹林"]


def test_protected_phrases_are_never_changed(lexicon: SynonymLexicon) -> None:
    text = "咳嗽变异性哮喘和继发性高血压"
    assert lexicon.find_terms(text) == []
    for seed in range(20):
        assert lexicon.vary(text, random.Random(seed)) == text


def test_vary_only_uses_document_forms_for_documents(lexicon: SynonymLexicon) -> None:
    seen = {lexicon.vary("高血压和心肌梗死", random.Random(seed), "document") for seed in range(40)}
    assert all("血压高" not in s for s in seen)
    assert {"高血压和心梗", "高血压和心肌梗塞", "高血压和心肌梗死"} <= seen
    queries = {lexicon.vary("高血压", random.Random(seed), "query") for seed in range(40)}
    assert queries == {"高血压", "血压高"}


def test_condition_names_are_canonical_terms(lexicon: SynonymLexicon) -> None:
    for cond in CONDITIONS:
        group = lexicon.group_of(cond.name)
        assert group is None or group.terms[0] == cond.name
