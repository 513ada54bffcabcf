"""Clinical terms are never removed as names (issue 40): the words LAC took for names in real doctor
answers stay intact, real names in their usual patterns still go, and each rule of the guard -- the
lexicon, the word boundary, the symptom characters -- and the lexicon loader, by hand."""

from __future__ import annotations

import json
import pickle
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from care.cli import app
from care.curate.pii.clinical import (
    ClinicalLexicon,
    NameGuard,
    inner_offsets,
    lexicon_from_graph,
    load_clinical_lexicon,
    read_lexicon,
)
from care.curate.pii.names import has_name_context
from care.curate.pii.rules import Span
from care.data.errors import DataFormatError

#: Sentences in the way of the dev set's answers, each with the word LAC tags as a person there.
CLINICAL_SENTENCES = [
    ("癫痫可以用卡马西平治疗，卡，马西平有副作用。", "马西平"),  # the tail of a drug the text split
    ("便秘可以多吃蜂蜜、香蕉、胡桃、杏仁、菠菜等食物。", "胡桃"),  # walnut (胡桃仁 in the lexicon)
    ("看到白大衣就紧张。", "白大衣"),  # of 白大衣高血压
    ("降压茶除了罗布麻的，还有菊花。", "罗布麻"),  # a herb
    ("注意歇息防止劳疲你的药物要按时吃。", "劳疲"),  # 疲 is a symptom character
    ("肾病综合征好发于青预后较好。", "于青"),  # starts inside 发于
]


@pytest.mark.parametrize("text, word", CLINICAL_SENTENCES)
def test_clinical_words_stay_intact(protected, unprotected, text, word):
    assert word in [s.text for s in unprotected.find(text)]  # the tagger does take it for a name
    assert protected.anonymise(text) == (text, [])


@pytest.mark.parametrize("text, expected", [
    ("患者张三今天来复诊。", "患者[NAME]今天来复诊。"),
    ("王医生说没事，按时吃药。", "[NAME]医生说没事，按时吃药。"),
    ("主治医生：李建国，请家属签字。", "主治医生：[NAME]，请家属签字。"),
    ("付洁，女，45岁，血压偏高。", "[NAME]，女，45岁，血压偏高。"),
    # 黄远 is a trade name in the lexicon, but after 患者 it names a person
    ("患者黄远今天来复诊。", "患者[NAME]今天来复诊。"),
])
def test_real_names_are_still_removed(protected, text, expected):
    assert protected.anonymise(text)[0] == expected


def test_cli_protects_unless_told_not_to(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": "看到白大衣就紧张。"}, ensure_ascii=False) + "\n", encoding="utf-8")
    for flags, expected in (([], "看到白大衣就紧张。"), (["--no-clinical-terms"], "看到[NAME]就紧张。")):
        out = tmp_path / f"out{len(flags)}.jsonl"
        result = CliRunner().invoke(app, ["curate", "anonymise", str(src), str(out), "--no-progress", *flags])
        assert result.exit_code == 0, result.output
        assert json.loads(out.read_text(encoding="utf-8"))["text"] == expected


def test_name_context():
    assert has_name_context("患者张三今天", 2, 4) and has_name_context("主治医生：李四", 5, 7)
    assert has_name_context("请找王医生", 2, 3)  # a title after it
    assert not has_name_context("多吃胡桃、杏仁", 2, 4)


# --- the rules by hand ------------------------------------------------------------------------------

LEXICON = ClinicalLexicon(frozenset({"卡马西平", "胡桃仁", "白大衣高血压", "尤佳"}), {"疲": 30, "痛": 50})


def test_terms_in_the_text_and_heads_and_tails():
    assert LEXICON.term_at("服用卡马西平后", 3, 6) == "卡马西平"  # 马西平 lies inside it
    assert LEXICON.term_at("服用卡马西平后", 2, 6) == "卡马西平" and LEXICON.term_at("卡，马西平", 2, 5) is None
    assert LEXICON.head_or_tail("胡桃") == "胡桃仁" and LEXICON.head_or_tail("马西平") == "卡马西平"
    assert LEXICON.head_or_tail("大衣高") is None and LEXICON.head_or_tail("张三") is None
    assert LEXICON.symptom_characters(40) == {"痛"}


def test_word_boundary_rule_by_hand():
    guard = NameGuard(LEXICON, symptom_chars=frozenset())
    # 发于 is a word of jieba's dictionary: 于青 starts inside it
    assert inner_offsets(["好", "发于", "青", "预后"]) == {2, 5}
    assert guard.why_not("好发于青预后", 2, 4, words=["好", "发于", "青", "预后"]) == "cuts a word"
    # the same span on word boundaries is not cut
    assert guard.why_not("好发于青预后", 2, 4, words=["好", "发", "于青", "预后"]) is None
    # a word jieba's HMM made up (交蔡) has no inside: names hide in unseen characters
    assert inner_offsets(["交蔡", "志强"]) == {3}
    assert guard.why_not("交蔡志强处理", 1, 4, words=["交蔡", "志强", "处理"]) is None
    # the segmentation is jieba's when none is given
    assert guard.why_not("肾病综合征好发于青预后较好", 7, 9) == "cuts a word"


def test_each_reason(protected):
    guard = NameGuard(LEXICON, symptom_chars=frozenset({"疲"}))
    assert guard.why_not("用卡马西平", 2, 5) == "clinical term 卡马西平"
    assert guard.why_not("卡，马西平", 2, 5) == "part of the clinical term 卡马西平"
    assert guard.why_not("防止劳疲你的", 2, 4, words=["防止", "劳", "疲", "你", "的"]) == "symptom character 疲"
    assert guard.why_not("付洁，女", 0, 2, words=["付", "洁", "，", "女"]) is None


def test_filter_judges_bare_names_only():
    guard = NameGuard(LEXICON, symptom_chars=frozenset())
    bare = Span(2, 4, "NAME", "尤佳")
    assert guard.filter("服用尤佳后", [bare]) == ([], [(bare, "clinical term 尤佳")])
    named = Span(2, 4, "NAME", "尤佳")
    assert guard.filter("患者尤佳复诊", [named]) == ([named], [])
    phone = Span(0, 11, "PHONE", "13812345678")
    assert guard.filter("13812345678", [phone]) == ([phone], [])


@settings(max_examples=100, deadline=None)
@given(text=st.text(min_size=1, max_size=40), cuts=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 4),
                                                                    st.sampled_from(["NAME", "PHONE"])), max_size=4))
def test_filter_partitions_any_spans_of_any_text(text, cuts):
    guard = NameGuard(LEXICON, symptom_chars=frozenset({"疲"}))
    spans = [Span(a, min(a + n, len(text)), kind, text[a:a + n]) for a, n, kind in cuts if a < len(text)]
    kept, dropped = guard.filter(text, spans)
    assert sorted(kept + [s for s, _ in dropped]) == sorted(spans)  # nothing lost, nothing made up
    assert all(s.type == "NAME" and not has_name_context(text, s.start, s.end) and reason for s, reason in dropped)
    assert [s for s in spans if s in kept] == kept  # order kept


# --- the lexicon loader -----------------------------------------------------------------------------

GRAPH = {
    "卡马西平片": {"成份": ["卡马西平", "淀粉"], "用法用量": ["口服，一次1片，一日2次"], "不良反应": ["头晕", "皮疹"]},
    "疲劳综合征": {"常见症状": ["疲劳", "乏力疲劳", "肌肉疼痛"], "别称": ["慢性疲劳综合征（CFS）", "疲"]},
    "Paget病": {"相关疾病": ["骨痛"]},
}


def test_lexicon_from_a_graph_by_hand(tmp_path):
    path = tmp_path / "graph.pkl"
    path.write_bytes(pickle.dumps(GRAPH))
    lexicon = read_lexicon(path)
    # entities and values of the term relations in Chinese characters, 2-16 long; sentences, Latin
    # letters, single characters and other relations (用法用量) left out
    assert lexicon.terms == {"卡马西平片", "卡马西平", "淀粉", "头晕", "皮疹", "疲劳综合征", "疲劳", "乏力疲劳",
                             "肌肉疼痛", "骨痛"}
    # symptom characters count the distinct symptom terms holding them
    assert lexicon.symptom_chars["疲"] == 2 and lexicon.symptom_chars["痛"] == 1 and "晕" not in lexicon.symptom_chars


def test_lexicon_errors_name_the_file(tmp_path):
    path = tmp_path / "graph.pkl"
    path.write_bytes(pickle.dumps(OrderedDict(GRAPH)))  # names a class: refused, not loaded
    with pytest.raises(DataFormatError, match=r"graph\.pkl: not a readable CMeKG pickle \(refusing to load "
                                              r"collections\.OrderedDict"):
        read_lexicon(path)
    path.write_bytes(pickle.dumps(["卡马西平"]))
    with pytest.raises(DataFormatError, match=r"graph\.pkl: the graph is a list, expected a dict of entities"):
        read_lexicon(path)
    with pytest.raises(DataFormatError, match=r"x\.pkl, field '头晕': entity '头晕' holds a list"):
        lexicon_from_graph({"头晕": ["x"]}, tmp_path / "x.pkl")
    with pytest.raises(DataFormatError, match="no clinical term"):
        lexicon_from_graph({"A": {"成份": ["B"]}}, tmp_path / "x.pkl")


def test_the_shipped_lexicon():
    lexicon = load_clinical_lexicon()
    assert {"卡马西平", "罗布麻", "白大衣高血压", "胡桃仁", "疲劳"} <= lexicon.terms
    assert "张三" not in lexicon and "王医生" not in lexicon and "黄远" in lexicon
    guard = NameGuard(lexicon)
    assert "疲" in guard.symptom_chars and not {"伟", "芳", "明", "丽"} & guard.symptom_chars
