"""The retrieval loaders on arbitrary content (issue 40): ``load_corpus`` / ``load_queries`` /
``load_qrels`` either load or raise :class:`DataFormatError` naming the file — never anything else."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from care.data.errors import DataFormatError
from care.data.retrieval import load_corpus, load_qrels, load_queries
from care.data.text_rules import has_visible, surrogate_at

from ..hostile_text import HOSTILE_TEXTS

#: Examples per property (each writes and reads one small file).
MAX_EXAMPLES = 150
#: Rows per generated file.
MAX_ROWS = 4

PROPERTY = settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
#: Any code point, lone surrogates included: JSON ``\ud800`` escapes decode to them.
ANY_CHAR_TEXT = st.text(st.characters(exclude_categories=()))
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_CHAR_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(ANY_CHAR_TEXT, children, max_size=3),
    max_leaves=6,
)
#: A row: mostly text in the expected fields, sometimes any JSON value or a missing field.
FIELD = ANY_CHAR_TEXT | st.text() | JSON_VALUE
ROW = st.fixed_dictionaries({}, optional={"_id": FIELD, "id": FIELD, "title": FIELD, "text": FIELD, "extra": JSON_VALUE})


def _write(path: Path, rows: list, ascii_only: bool, raw_lines: list[str]) -> Path:
    lines = [json.dumps(row, ensure_ascii=ascii_only) for row in rows]
    # ensure_ascii=False cannot write a lone surrogate as UTF-8: write it escaped
    text = "\n".join([*lines, *raw_lines]) + "\n"
    path.write_bytes(text.encode("utf-8", errors="backslashreplace"))
    return path


def _loads_or_refuses(load, path: Path) -> None:
    try:
        load(path)
    except DataFormatError as exc:
        assert str(path) in str(exc)


@PROPERTY
@given(rows=st.lists(ROW, max_size=MAX_ROWS), ascii_only=st.booleans(), raw=st.lists(st.text(), max_size=2))
@example(rows=[{"_id": "d1", "title": t, "text": ""} for t in HOSTILE_TEXTS], ascii_only=False, raw=[])
@example(rows=[{"_id": "q1", "text": "\ud800"}], ascii_only=True, raw=[])
def test_corpus_and_queries_load_or_raise_data_format_error(tmp_path_factory, rows, ascii_only, raw):
    path = _write(tmp_path_factory.mktemp("rows") / "rows.jsonl", rows, ascii_only, raw)
    _loads_or_refuses(load_corpus, path)
    _loads_or_refuses(load_queries, path)


@PROPERTY
@given(lines=st.lists(st.lists(st.text(), max_size=4).map("\t".join) | st.text(), max_size=MAX_ROWS))
@example(lines=["query-id\tcorpus-id\tscore", "q1\td1\t１", "q1\td2\t-0", "q2\td1\t" + "9" * 5000])
def test_qrels_load_or_raise_data_format_error(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("qrels") / "qrels.tsv"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", errors="backslashreplace"))
    _loads_or_refuses(lambda p: load_qrels(p, query_ids=["q1", "q2"], corpus_ids=["d1", "d2"]), path)
    _loads_or_refuses(load_qrels, path)


def test_a_lone_surrogate_is_refused_naming_line_and_field(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text('{"id": "q1", "text": "ok"}\n{"id": "q2", "text": "\\u5934\\ud800"}\n', encoding="utf-8")
    try:
        load_queries(path)
    except DataFormatError as exc:
        message = str(exc)
    else:
        raise AssertionError("a lone surrogate loaded")
    assert "line 2" in message and "text" in message and "U+D800" in message


@PROPERTY
@given(text=ANY_CHAR_TEXT, title=ANY_CHAR_TEXT)
@example(text="\u200b\u200b", title="")
@example(text="\u200b", title="头痛")
@example(text="\x00\x01 ", title="")
@example(text="\ufeff的", title="")
def test_a_document_loads_exactly_when_it_shows_something(tmp_path_factory, text, title):
    """One rule for every corpus text: kept as written when it shows a character, refused (naming line and
    field) when it shows nothing — unless a visible title stands in for it, as BEIR's title-only documents."""
    path = _write(tmp_path_factory.mktemp("doc") / "corpus.jsonl", [{"_id": "d1", "title": title, "text": text}],
                  True, [])
    title_ok = surrogate_at(title) is None
    if has_visible(title) and title_ok and not has_visible(text):
        assert load_corpus(path)["d1"].text == ""
    elif has_visible(text) and surrogate_at(text) is None and title_ok:
        assert load_corpus(path)["d1"].text == text
    else:
        try:
            load_corpus(path)
        except DataFormatError as exc:
            assert exc.line == 1 and exc.field in {"text", "title"}
        else:
            raise AssertionError(f"loaded a document with text {text!r} and title {title!r}")
