"""The anonymiser: validators against hand-checked numbers, placeholders, the labelled set's scores,
and resumable file processing."""

from __future__ import annotations

import json

import pytest

from care.curate.pii.anonymiser import Anonymiser, AnonymiserConfig, anonymise_file
from care.curate.pii.eval_dense import valid_resident_id
from care.curate.pii.eval_line import EvalLine
from care.curate.pii.eval_set import generate_eval_set
from care.curate.pii.rules import Span, id_checksum_char, is_valid_resident_id, luhn_valid
from care.curate.pii.scoring import score_eval_set
from care.errors import CareError


def test_resident_id_checksum_matches_the_standard_example():
    # GB 11643-1999 worked example: 11010519491231002 -> check character X
    assert id_checksum_char("11010519491231002") == "X"
    assert is_valid_resident_id("11010519491231002X")
    assert not is_valid_resident_id("110105194912310021")  # wrong check character
    assert not is_valid_resident_id("11010519491331002X")  # month 13


def test_luhn():
    assert luhn_valid("4111111111111111") and luhn_valid("6222020200000000008") is False
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")


def test_anonymise_replaces_every_type_with_its_placeholder():
    text = ("患者张伟，男，45岁，身份证号11010519491231002X，电话138-1234-5678，座机010-62345678，"
            "住址：北京市朝阳区建国路88号3单元501室。邮箱zhang.w@163.com，详见https://www.example.com/a?b=1。"
            "银行卡4111 1111 1111 1111，住院号：ZY20230012。空腹血糖7.8mmol/L，订单号037274858490。")
    out, spans = Anonymiser().anonymise(text)
    assert out == ("患者[NAME]，男，45岁，身份证号[ID]，电话[PHONE]，座机[PHONE]，住址：[ADDRESS]。邮箱[EMAIL]，"
                   "详见[URL]。银行卡[BANK_CARD]，住院号：[MRN]。空腹血糖7.8mmol/L，订单号037274858490。")
    assert sorted({s.type for s in spans}) == ["ADDRESS", "BANK_CARD", "EMAIL", "ID", "MRN", "NAME", "PHONE", "URL"]


def test_common_medical_words_are_not_names():
    text = "高血压患者应当在医生指导下服药，康复期间互相配合医生治疗，黄疸患者都是由于肝病引起。"
    assert Anonymiser().find(text) == []


def test_selected_types_and_custom_placeholder():
    config = AnonymiserConfig(types=("PHONE",), placeholder="<{type}>")
    out, _ = Anonymiser(config).anonymise("患者张伟电话13812345678")
    assert out == "患者张伟电话<PHONE>"
    with pytest.raises(CareError, match="unknown PII types"):
        AnonymiserConfig(types=("SSN",))


def test_dense_set_meets_the_recall_target():
    lines = generate_eval_set(300, seed=7, style="dense")
    assert lines == generate_eval_set(300, seed=7, style="dense")  # deterministic
    ids = [s.text for line in lines for s in line.pii if s.type == "ID"]
    assert ids and all(is_valid_resident_id(i) for i in ids)
    assert {s.type for line in lines for s in line.pii} >= {"URL", "NAME", "ADDRESS", "MRN"}
    anonymiser = Anonymiser()
    scores = score_eval_set(lines, [anonymiser.find(line.text) for line in lines])
    assert scores.removed["STRUCTURED"].typed_share >= 0.99 and scores.predicted["STRUCTURED"].share >= 0.99
    assert scores.removed["NAME"].typed_share >= 0.9 and scores.removed["ADDRESS"].typed_share >= 0.9
    assert scores.kept["ALL"].total >= 300 and scores.kept["ALL"].share >= 0.99  # the look-alike sentences


def test_span_scoring_by_hand():
    line = EvalLine("张三丰，13812345678，血糖7.8", (Span(0, 3, "NAME", "张三丰"), Span(4, 15, "PHONE", "13812345678")),
                    (Span(18, 21, "clinical", "7.8"),))
    pred = [Span(0, 2, "NAME", "张三"), Span(19, 21, "PHONE", ".8")]
    s = score_eval_set([line], [pred])
    assert s.removed["NAME"].typed_share == 1.0 and s.removed["NAME"].exact == 0 and s.removed["NAME"].share == 0.0
    assert s.removed["PHONE"].typed_share == 0.0 and s.predicted["PHONE"].share == 0.0
    assert s.removed["ALL"].typed_share == 0.5 and s.predicted["ALL"].share == 0.5
    assert s.kept["ALL"].share == 0.0 and s.spurious == 1


def test_unknown_style_is_refused():
    with pytest.raises(CareError, match="unknown evaluation-set style 'tidy'; use one of written, dense"):
        generate_eval_set(5, style="tidy")


def test_anonymise_file_resumes_and_reports(tmp_path):
    import random

    rng = random.Random(0)
    rows = [{"id": i, "text": f"第{i}位患者，身份证{valid_resident_id(rng)}", "pos": [f"电话1380000{i:04d}"]} for i in range(25)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    ref = anonymise_file(src, tmp_path / "ref.jsonl", chunk_size=10, show_progress=False)
    assert ref.removed == {"ID": 25, "PHONE": 25} and ref.rows == ref.rows_changed == 25

    out = tmp_path / "out.jsonl"
    calls = {"n": 0}
    original = Anonymiser.anonymise

    def crash_midway(self, text):
        calls["n"] += 1
        if calls["n"] == 30:  # inside the second chunk
            raise KeyboardInterrupt
        return original(self, text)

    Anonymiser.anonymise = crash_midway
    try:
        with pytest.raises(KeyboardInterrupt):
            anonymise_file(src, out, chunk_size=10, show_progress=False)
    finally:
        Anonymiser.anonymise = original
    assert not out.exists()
    report = anonymise_file(src, out, chunk_size=10, report_path=tmp_path / "report.json", show_progress=False)
    assert out.read_text(encoding="utf-8") == (tmp_path / "ref.jsonl").read_text(encoding="utf-8")
    assert report.removed == ref.removed and report.rows == 25
    assert json.loads((tmp_path / "report.json").read_text())["removed"] == {"ID": 25, "PHONE": 25}
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first == {"id": 0, "text": "第0位患者，身份证[ID]", "pos": ["电话[PHONE]"]}
