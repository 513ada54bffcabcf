"""The training-file format: validation naming file/line/field, false-negative dropping, random access, round trip."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pytest

from care.data.errors import DataFormatError
from care.data.training import DOC_ALIGN, QUERY_ALIGN, RETRIEVAL, TrainingFile, load_training_file, write_training_file

ROWS = [
    {"query": "头痛怎么办", "pos": ["多休息，必要时服用止痛药"], "neg": ["胃痛可以吃奥美拉唑", "感冒多喝水"]},
    {"query": "高血压吃什么药", "pos": ["常用氨氯地平", "可用缬沙坦"], "neg": ["常用氨氯地平", "糖尿病用二甲双胍"],
     "prompt": "Given a medical question, retrieve answers", "type": "normal"},
    {"query": "发烧", "pos": ["发烧"], "neg": ["发冷"], "type": "query_align"},
    {"query": "咳嗽有痰", "pos": ["咳嗽有痰"], "neg": ["咳嗽无痰"], "type": "doc_align",
     "pos_scores": [0.9], "neg_scores": [0.2]},
]


def write_rows(path: Path, rows: list, raw_lines: list[str] | None = None) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows] + (raw_lines or [])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_valid_file_and_drop_false_negative(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_rows(tmp_path / "train.jsonl", ROWS)
    with caplog.at_level(logging.WARNING):
        rows = load_training_file(path)
    assert len(rows) == 4
    assert rows[1].neg == ("糖尿病用二甲双胍",)  # "常用氨氯地平" is also a positive -> dropped
    assert "dropped 1 negative" in caplog.text and "lines 2" in caplog.text
    assert rows[1].prompt.startswith("Given") and rows[1].kind == RETRIEVAL
    assert [r.kind for r in rows] == [RETRIEVAL, RETRIEVAL, QUERY_ALIGN, DOC_ALIGN]
    assert rows[3].pos_scores == (0.9,) and rows[3].neg_scores == (0.2,)
    assert (rows[0].source, rows[0].line) == (str(path), 1)


@pytest.mark.parametrize(("bad", "field", "problem"), [
    ({"pos": ["a"], "neg": []}, "query", "missing field"),
    ({"query": "q", "pos": [], "neg": []}, "pos", "empty list"),
    ({"query": "q", "neg": ["n"]}, "pos", "missing field"),
    ({"query": "q", "pos": ["a", 3]}, "pos", "item 1"),
    ({"query": "q", "pos": ["a"], "neg": [""]}, "neg", "item 0"),
    ({"query": 5, "pos": ["a"]}, "query", "expected a string"),
    ({"query": "q", "pos": ["a"], "prompt": 1}, "prompt", "expected a string"),
    ({"query": "q", "pos": ["a"], "neg": ["b"], "neg_scores": [1, 2]}, "neg_scores", "2 scores for 1"),
])
def test_bad_rows_name_file_line_and_field(tmp_path: Path, bad: dict, field: str, problem: str) -> None:
    path = write_rows(tmp_path / "bad.jsonl", ROWS[:2] + [bad])
    for loader in (load_training_file, TrainingFile):
        with pytest.raises(DataFormatError) as info:
            loader(path)
        err = info.value
        assert (err.path, err.line, err.field) == (path, 3, field)
        assert problem in str(err) and "bad.jsonl, line 3" in str(err)


def test_malformed_json_and_empty_file(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "t.jsonl", ROWS[:1], raw_lines=["{not json"])
    for loader in (load_training_file, TrainingFile):
        with pytest.raises(DataFormatError, match="line 2.*malformed JSON"):
            loader(path)
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no training examples"):
        TrainingFile(tmp_path / "empty.jsonl")


def test_training_file_random_access_matches_loader(tmp_path: Path) -> None:
    # a BOM, a CRLF line and a blank line must not shift the offsets
    text = "\ufeff" + json.dumps(ROWS[0], ensure_ascii=False) + "\r\n\n" + "\n".join(
        json.dumps(r, ensure_ascii=False) for r in ROWS[1:]) + "\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(text.encode("utf-8"))
    eager = load_training_file(path)
    lazy = TrainingFile(path)
    assert len(lazy) == 4 and [lazy[i] for i in range(4)] == eager and lazy[-1] == eager[-1]
    assert [lazy.line_of(i) for i in range(4)] == [1, 3, 4, 5]
    assert lazy.kinds == [RETRIEVAL, RETRIEVAL, QUERY_ALIGN, DOC_ALIGN]
    assert lazy.negative_counts == [2, 1, 1, 1]
    assert pickle.loads(pickle.dumps(lazy))[2] == eager[2]  # DataLoader workers
    assert len(TrainingFile(path, max_examples=2)) == 2
    lazy.close()


def test_round_trip_write(tmp_path: Path) -> None:
    rows = load_training_file(write_rows(tmp_path / "a.jsonl", ROWS))
    write_training_file(tmp_path / "b.jsonl", rows)
    again = load_training_file(tmp_path / "b.jsonl")
    assert [r.to_json() for r in again] == [r.to_json() for r in rows]


def test_pos_may_be_one_text_or_spelt_positive(tmp_path: Path) -> None:
    """``"pos": "one answer"`` is one positive (not its characters); ``positive`` is read as ``pos``."""
    path = write_rows(tmp_path / "train.jsonl", [{"query": "头痛", "pos": "多休息，必要时服用止痛药"},
                                                 {"query": "咳嗽", "positive": "多喝水"},
                                                 {"query": "发烧", "positive": ["退烧", "物理降温"], "neg": "发冷"}])
    rows = load_training_file(path)
    assert [r.pos for r in rows] == [("多休息，必要时服用止痛药",), ("多喝水",), ("退烧", "物理降温")]
    assert rows[2].neg == ("发冷",) and rows[2].to_json()["pos"] == ["退烧", "物理降温"]
    both = write_rows(tmp_path / "both.jsonl", [{"query": "头痛", "pos": ["a"], "positive": ["b"]}])
    with pytest.raises(DataFormatError, match=r"both.jsonl, line 1, field 'pos': both 'pos' and 'positive' given"):
        load_training_file(both)
