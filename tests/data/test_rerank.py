"""care.data.rerank: rerank files."""

import pytest

from care.data.errors import DataFormatError
from care.data.rerank import RerankExample, load_rerank, write_rerank


def test_rerank_round_trip_and_single_string_positive(tmp_path):
    path = tmp_path / "rerank.jsonl"
    write_rerank(path, [RerankExample("头痛", ("休息",), ("吃饭",))])
    assert load_rerank(path) == [RerankExample("头痛", ("休息",), ("吃饭",))]
    path.write_text('{"query": "头痛", "positive": "休息"}\n', encoding="utf-8")
    assert load_rerank(path)[0].positive == ("休息",) and load_rerank(path)[0].negative == ()


@pytest.mark.parametrize("row, message", [
    ('{"query": "q", "positive": []}', "field 'positive': empty list"),
    ('{"query": "q", "positive": ["a", " "]}', "field 'positive': item 1 is not a string with visible text"),
    ('{"query": " ", "positive": ["a"]}', "field 'query': empty or whitespace-only text"),
    ('{"query": "q", "positive": ["a"], "negative": {"x": 1}}', "field 'negative': expected a list of strings, got dict"),
])
def test_bad_rerank_rows(tmp_path, row, message):
    path = tmp_path / "rerank.jsonl"
    path.write_text('{"query": "ok", "positive": ["a"]}\n' + row + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"line 2, {message}"):
        load_rerank(path)
