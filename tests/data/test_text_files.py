"""Texts of a file of any CARE format: every row read by its own format's parser."""

from __future__ import annotations

import json

import pytest

from care.data.errors import DataFormatError
from care.data.text_files import iter_file_texts, texts_of_files


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_each_row_is_read_by_its_format(tmp_path):
    path = _jsonl(tmp_path / "mixed.jsonl", [
        {"query": "头痛", "pos": ["多休息"], "neg": ["吃糖"]},
        {"query": "咳嗽", "positive": "多喝水", "prompt": "问："},          # training, positive as one string
        {"_id": "d1", "title": "高血压", "text": "", "metadata": {"url": "x"}},  # BEIR title-only document
        {"id": "d2", "title": "胃炎", "text": "少吃辛辣"},
        {"query": "发烧", "positive": ["退烧"], "negative": ["发冷"]},        # rerank
        {"sentence1": "胸闷", "sentence2": "胸口发闷", "score": 4},           # STS
        {"text": "失眠"},                                                     # raw text
    ])
    assert list(iter_file_texts(path)) == ["头痛", "多休息", "吃糖", "问：", "咳嗽", "多喝水", "高血压", "胃炎 少吃辛辣",
                                           "发烧", "退烧", "发冷", "胸闷", "胸口发闷", "失眠"]
    txt = tmp_path / "texts.txt"
    txt.write_text("胃痛\n\n反酸\n", encoding="utf-8")
    assert texts_of_files([txt, txt]) == ["胃痛", "反酸", "胃痛", "反酸"]


@pytest.mark.parametrize(("row", "message"), [
    ({"id": "3"}, r"bad.jsonl, line 2, field 'text': missing field"),
    ({"query": "x", "pos": "a", "positive": "b"}, r"line 2, field 'pos': both 'pos' and 'positive' given"),
    ({"label": "x"}, r"line 2: a row of no known format"),
])
def test_a_bad_row_names_file_line_and_field(tmp_path, row, message):
    path = _jsonl(tmp_path / "bad.jsonl", [{"text": "好"}, row])
    with pytest.raises(DataFormatError, match=message):
        list(iter_file_texts(path))
