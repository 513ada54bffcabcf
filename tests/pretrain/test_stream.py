"""TextStream: line parsing errors, and each record served exactly once per epoch across a resume."""

from __future__ import annotations

import json

import pytest

from care.data.errors import DataFormatError
from care.pretrain.stream import PairParser, TextParser, TextStream


def _numbered(path, n):
    path.write_text("".join(f"text {i}\n" + ("\n" if i % 7 == 0 else "") for i in range(n)), encoding="utf-8")
    return path


@pytest.mark.parametrize("buffer", [0, 5])
def test_resume_serves_every_line_once_per_epoch(tmp_path, buffer):
    files = [_numbered(tmp_path / "a.txt", 23), tmp_path / "b.txt"]
    files[1].write_text("".join(f"other {i}\n" for i in range(11)), encoding="utf-8")
    expected = {f"text {i}" for i in range(23)} | {f"other {i}" for i in range(11)}

    straight = TextStream(files, TextParser(), seed=1, shuffle_buffer=buffer)
    epoch0 = list(straight)
    straight.next_epoch()
    epoch1 = list(straight)
    assert sorted(epoch0) == sorted(expected) and len(epoch0) == 34
    assert sorted(epoch1) == sorted(expected)
    if buffer:
        assert epoch0 != epoch1  # reshuffled each epoch

    first = TextStream(files, TextParser(), seed=1, shuffle_buffer=buffer)
    head = first.read(13) + first.read(13)  # stop inside file b
    state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint stores
    resumed = TextStream(files, TextParser(), seed=1, shuffle_buffer=buffer)
    resumed.load_state_dict(state)
    tail = resumed.read(100)
    assert resumed.read(5) == [] and resumed.exhausted
    assert head + tail == epoch0  # nothing lost, nothing repeated, same order
    resumed.next_epoch()
    assert list(resumed) == epoch1
    assert resumed.count_records() == 34


def test_jsonl_text_field_and_bom(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\ufeff" + json.dumps({"text": " 头痛 "}) + "\n\n" + json.dumps({"body": "x", "text": "发烧"}) + "\n",
                    encoding="utf-8")
    assert list(TextStream([path], TextParser())) == ["头痛", "发烧"]


@pytest.mark.parametrize("line, problem", [
    ('{"text": "ok"}\n{"text": ', "line 2.*malformed JSON"),
    ('{"text": "ok"}\n["a"]', "line 2.*expected a JSON object"),
    ('{"text": "ok"}\n{"txt": "a"}', "line 2, field 'text'.*missing field"),
    ('{"text": "ok"}\n{"text": 3}', "line 2, field 'text'.*expected a string"),
])
def test_bad_jsonl_line_names_file_and_line(tmp_path, line, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(line, encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.jsonl.*" + problem):
        list(TextStream([path], TextParser()))


def test_pairs_fields_lists_and_errors(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"query": "q1", "pos": ["d1", "d2"]}) + "\n" + json.dumps({"query": "q2", "pos": []}) + "\n",
                    encoding="utf-8")
    stream = TextStream([path], PairParser(["query", "pos"]))
    assert stream.read(1) == [("q1", "d1")]
    with pytest.raises(DataFormatError, match="line 2, field 'pos'.*empty list"):
        stream.read(1)
    with pytest.raises(DataFormatError, match="line 1, field 'content'"):
        list(TextStream([path], PairParser(["query", "content"])))
    txt = tmp_path / "p.txt"
    txt.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="p.txt, line 1: contrastive pairs must be a JSONL file"):
        list(TextStream([txt], PairParser()))


def test_invalid_utf8_and_missing_file(tmp_path):
    path = tmp_path / "gbk.txt"
    path.write_bytes("好\n".encode() + "头痛医院".encode("gb18030") + b"\xff\n")
    with pytest.raises(DataFormatError, match="gbk.txt, line 2: not valid UTF-8"):
        list(TextStream([path], TextParser()))
    with pytest.raises(DataFormatError, match="file not found"):
        TextStream([tmp_path / "nope.txt"], TextParser())


def test_a_beir_corpus_with_a_title_only_document_streams(tmp_path):
    """RetroMAE on a corpus exactly as BEIR publishes it stopped at its title-only document ('empty or
    whitespace-only text'), a row every corpus reader accepts; it is skipped like a blank line."""
    from tests.beir_folder import DOCS, TITLE_ONLY, write_beir_folder

    files = write_beir_folder(tmp_path)
    stream = TextStream([files.corpus], TextParser("text"), shuffle_buffer=0)
    texts = list(stream)
    assert texts == [text for doc_id, _, text in DOCS if doc_id != TITLE_ONLY]
    parser = TextParser("text")
    assert parser(files.corpus, 1, json.dumps({"_id": "z", "title": "頭痛", "text": "\u200b"})) is None
    with pytest.raises(DataFormatError, match="line 1, field 'text'"):
        parser(files.corpus, 1, json.dumps({"_id": "z", "title": "", "text": ""}))  # nothing at all: still refused
