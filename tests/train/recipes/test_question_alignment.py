"""``care.train.recipes.question_alignment``: CARE [rich]'s rows, then one row per question it does not hold."""

from __future__ import annotations

import json

import pytest

from care.data.errors import DataFormatError
from care.data.io import write_jsonl
from care.train.recipes.question_alignment import question_texts, write_question_alignment


def test_questions_follow_the_rich_rows_once_each(tmp_path):
    write_jsonl(tmp_path / "rich.jsonl", [{"query": q, "pos": [q], "neg": ["多喝水"], "type": "query_align"}
                                          for q in ("头痛怎么办", "发烧吃什么药")])
    write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "title": "", "text": "宝宝十个月没长牙怎么办"},
                                            {"_id": "d2", "title": "", "text": "头痛怎么办"}])
    write_jsonl(tmp_path / "train.jsonl", [{"query": "孩子左下腹部疼", "pos": ["腹痛"]},
                                           {"query": "宝宝十个月没长牙怎么办", "pos": ["长牙"]}])
    questions = question_texts([tmp_path / "corpus.jsonl"], [tmp_path / "train.jsonl"])
    assert questions == ["宝宝十个月没长牙怎么办", "头痛怎么办", "孩子左下腹部疼", "宝宝十个月没长牙怎么办"]
    counts = write_question_alignment(tmp_path / "rich.jsonl", questions, tmp_path / "out.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["query"] for r in rows] == ["头痛怎么办", "发烧吃什么药", "宝宝十个月没长牙怎么办", "孩子左下腹部疼"]
    assert counts == {"rich_rows": 2, "questions": 4, "question_rows": 2}
    assert all(r["type"] == "query_align" and r["pos"] == [r["query"]] and r["neg"] for r in rows)


def test_a_question_file_with_a_blank_text_is_refused_by_line(tmp_path):
    (tmp_path / "log.jsonl").write_text('{"_id": "1", "text": "头痛"}\n{"_id": "2", "text": ""}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"log.jsonl, line 2, field 'text'"):
        question_texts([tmp_path / "log.jsonl"])
