"""Medical words of encyclopedic text stay whole (issue 60): eponyms, historic physicians, herbs, drugs,
physiology terms and place names outside a person's address; real names and addresses still go."""

from __future__ import annotations

import pytest

from care.curate.pii.address import find_addresses
from care.curate.pii.medical_terms import MedicalTerms, load_medical_terms, protected_terms

#: Encyclopedic sentences (disease articles, herb monographs, physiology) with the word LAC takes for a
#: person there; the anonymiser without the protection removes it (checked below), with it keeps it.
ENCYCLOPEDIC = [
    ("唐氏儿是指患有唐氏综合征的婴儿，唐氏儿的智力发育明显落后。", "唐氏儿"),
    ("孕妇年龄越大，生育唐氏儿的风险越高。", "唐氏儿"),
    ("伏格特-小柳-原田病是一种累及眼、耳、皮肤和脑膜的自身免疫病。", "伏格特"),
    ("张景岳认为，阳非有余，阴常不足。", "张景岳"),
    ("《景岳全书》为明代张景岳所著。", "张景岳"),
    ("张景岳在《景岳全书》中提出了“阳非有余”的观点。", "张景岳"),
    ("叶天士创立了卫气营血辨证。", "叶天士"),
    ("吴鞠通著《温病条辨》。", "吴鞠通"),
    ("张仲景被后世尊为医圣。", "张仲景"),
    ("朱丹溪提出阳常有余阴常不足的观点。", "朱丹溪"),
    ("黄蜀葵，又名秋葵，其花入药。", "黄蜀葵"),
    ("龙胆紫俗称紫药水。", "龙胆紫"),
    ("多普勒超声可见收缩峰和舒张峰。", "舒张峰"),
    ("舒张峰降低提示心室舒张功能减退。", "舒张峰"),
    ("浦肯野纤维分布于心室肌。", "浦肯野"),
    ("郎飞结是有髓神经纤维上的缩窄部。", "郎飞结"),
    ("柯蒂氏器位于内耳。", "柯蒂氏"),
]


@pytest.mark.parametrize("text, word", ENCYCLOPEDIC)
def test_encyclopedic_medical_words_stay_whole(protected, unprotected, text, word):
    assert any(word in s.text for s in unprotected.find(text))  # the tagger does take it for a name
    assert protected.anonymise(text) == (text, [])


@pytest.mark.parametrize("text", [
    "本病在我国北京、上海、广州等地发病率较高。",
    "本病在我国分布广泛，以河北、山东、河南、安徽等省多见。",
    "新疆、西藏、青海等地区报告病例较少。",
    "本病多见于广东、广西、福建、湖南、江西等省区。",
    "我国湖北省武汉市、江苏省南京市等地均有病例报告。",
    "在云南省西双版纳州、广西壮族自治区百色市等地曾发生暴发流行。",
    "湖南省长沙市、湘潭市、株洲市均有报道。",
])
def test_place_names_in_an_epidemiology_list_stay(protected, text):
    assert protected.anonymise(text) == (text, [])
    assert find_addresses(text) == []


@pytest.mark.parametrize("text, expected", [
    ("患者家住湖北省武汉市，近日发热。", "患者家住[ADDRESS]，近日发热。"),  # an anchor: a person's home
    ("住址：江苏省南京市鼓楼区", "住址：[ADDRESS]"),
    ("寄到浙江省杭州市西湖区文三路88号3单元501室", "寄到[ADDRESS]"),
    ("我在杭州市西湖区文三路88号上班", "我在[ADDRESS]上班"),  # no anchor, but down to the door
    ("霍邱县城关镇东湖村3组15号", "[ADDRESS]"),
])
def test_addresses_are_still_removed(protected, text, expected):
    assert protected.anonymise(text)[0] == expected


@pytest.mark.parametrize("text, expected", [
    ("本文由李建国医生审核。", "本文由[NAME]医生审核。"),
    ("患者张景明，男，45岁，确诊原田病。", "患者[NAME]，男，45岁，确诊原田病。"),
    ("王建国病情稳定，已出院。", "[NAME]病情稳定，已出院。"),  # 病情 is a word: 王建国 is no disease
    ("患儿付晓洁症状好转。", "患儿[NAME]症状好转。"),
    ("患者唐丽，唐氏综合征筛查低风险。", "患者[NAME]，唐氏综合征筛查低风险。"),
])
def test_real_names_in_medical_text_are_still_removed(protected, text, expected):
    assert protected.anonymise(text)[0] == expected


def test_each_rule_by_hand():
    terms = MedicalTerms(frozenset({"黄蜀葵"}), {"舒张": 16, "王建": 1})
    assert terms.why_not("取黄蜀葵花", 1, 3) == "medical term 黄蜀葵"  # overlapping, not covering
    assert terms.why_not("《景岳全书》", 1, 4) == "inside a book title"
    assert terms.why_not("唐氏儿的", 0, 3) == "an eponym with 氏"
    assert terms.why_not("伏格特-小柳-原田病是", 0, 3) == "part of the eponym 伏格特-小柳-原田病"
    assert terms.why_not("格林巴利综合征", 0, 4) == "an eponym before 综合征"
    assert terms.why_not("原田病又称", 0, 2) == "a disease name 原田病"
    assert terms.why_not("原田病情", 0, 2) is None
    assert terms.why_not("清代医家叶天士", 4, 7) == "a historic person after 清代医家"
    assert terms.why_not("吴鞠通著《温病条辨》", 0, 3) == "the author of a book"
    assert terms.why_not("舒张峰降低", 0, 3) == "starts with the medical word 舒张"
    assert terms.why_not("王建国来了", 0, 3) is None  # 王建 is in one term only
    assert terms.why_not("付洁，女", 0, 2) is None


def test_the_shipped_lists():
    terms = protected_terms()
    for word in ("伏格特-小柳-原田病", "张景岳", "龙胆紫", "黄蜀葵", "等容舒张", "舒张峰"):
        assert word in terms
    assert len(terms) > 350
    assert all("#" not in w for w in terms)
    assert load_medical_terms().why_not("等容舒张期", 0, 3) == "medical term 等容舒张期"  # the longest
