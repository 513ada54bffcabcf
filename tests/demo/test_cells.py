"""Graded relevance between cells and validation of the hand-authored tables."""

from __future__ import annotations

import dataclasses

import pytest

from care.demo.cells import GRADE_ANSWERS, GRADE_NONE, GRADE_PARTIAL, Cell, RelevanceScheme, validate_content
from care.demo.content import ASPECTS, CONDITIONS, PROTECTED_PHRASES, RELATED_ASPECTS, SYNONYM_GROUPS
from care.demo.lexicon import SynonymLexicon
from care.errors import CareError

COND = {c.key: c for c in CONDITIONS}
ASP = {a.key: a for a in ASPECTS}
LEXICON = SynonymLexicon(SYNONYM_GROUPS, PROTECTED_PHRASES)


def cell(cond: str, aspect: str) -> Cell:
    return Cell(COND[cond], ASP[aspect])


@pytest.mark.parametrize(
    ("query", "doc", "grade"),
    [
        (("coronary_heart_disease", "symptom"), ("coronary_heart_disease", "symptom"), GRADE_ANSWERS),
        (("coronary_heart_disease", "symptom"), ("coronary_heart_disease", "diagnosis"), GRADE_PARTIAL),
        (("coronary_heart_disease", "symptom"), ("myocardial_infarction", "symptom"), GRADE_PARTIAL),
        (("coronary_heart_disease", "symptom"), ("myocardial_infarction", "diagnosis"), GRADE_NONE),
        (("coronary_heart_disease", "symptom"), ("coronary_heart_disease", "treatment"), GRADE_NONE),
        (("coronary_heart_disease", "symptom"), ("diabetes", "symptom"), GRADE_NONE),
        (("diabetes", "treatment"), ("diabetes", "lifestyle"), GRADE_PARTIAL),
        (("diabetes", "cause"), ("diabetes", "prevention"), GRADE_PARTIAL),
    ],
)
def test_grades(query: tuple[str, str], doc: tuple[str, str], grade: int) -> None:
    assert RelevanceScheme(RELATED_ASPECTS).grade(cell(*query), cell(*doc)) == grade


def test_shipped_content_is_valid() -> None:
    validate_content(CONDITIONS, ASPECTS, LEXICON, min_facts=4)
    assert len(CONDITIONS) >= 20


def test_a_fact_without_full_stop_is_rejected() -> None:
    bad = dataclasses.replace(COND["gout"], facts={**COND["gout"].facts, "symptom": ("关节痛", "a。", "b。")})
    with pytest.raises(CareError, match="gout/symptom: fact '关节痛' must end with '。'"):
        validate_content([bad], ASPECTS, LEXICON, min_facts=2)


def test_too_few_facts_and_one_way_relations_are_rejected() -> None:
    with pytest.raises(CareError, match="needs at least 9 fact sentences"):
        validate_content(CONDITIONS, ASPECTS, LEXICON, min_facts=9)
    lonely = dataclasses.replace(COND["diabetes"], related=("gout",))
    others = [c for c in CONDITIONS if c.key != "diabetes"]
    with pytest.raises(CareError, match="diabetes lists gout as related but not the other way round"):
        validate_content([lonely, *others], ASPECTS, LEXICON, min_facts=2)


def test_shared_templates_are_rejected() -> None:
    leaky = dataclasses.replace(ASP["symptom"], train_templates=ASP["symptom"].bench_templates[:1])
    with pytest.raises(CareError, match="templates used for both benchmark and training"):
        validate_content(CONDITIONS, [leaky, *ASPECTS[1:]], LEXICON, min_facts=2)
