"""``parse_training_row`` on arbitrary field values (issue 40): a row either parses into an example or
raises :class:`DataFormatError` naming the file and line — never anything else."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from care.data.errors import DataFormatError
from care.data.training import parse_training_row

from ..hostile_text import HOSTILE_TEXTS

#: Examples per property (parsing is pure Python, microseconds each).
MAX_EXAMPLES = 300
#: Line number the rows claim to come from.
LINE = 7
PATH = Path("train.jsonl")

#: Any code point, lone surrogates included (a JSON ``\ud800`` escape decodes to one).
ANY_TEXT = st.text(st.characters(exclude_categories=())) | st.text()
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3),
    max_leaves=6,
)
TEXTS = st.lists(ANY_TEXT, max_size=3) | ANY_TEXT
FIELDS = {
    "query": ANY_TEXT | JSON_VALUE, "pos": TEXTS | JSON_VALUE, "positive": TEXTS, "neg": TEXTS | JSON_VALUE,
    "pos_scores": st.lists(st.floats() | st.integers(), max_size=3) | JSON_VALUE,
    "neg_scores": st.lists(st.floats() | st.integers(), max_size=3) | JSON_VALUE,
    "prompt": ANY_TEXT | JSON_VALUE, "type": ANY_TEXT | JSON_VALUE,
}


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(row=st.fixed_dictionaries({}, optional=FIELDS))
@example(row={"query": "是什么", "pos": list(HOSTILE_TEXTS), "neg": ["\u200b", "😀"], "type": "😀"})
@example(row={"query": "高血壓", "pos": "\ud800"})
def test_a_row_parses_or_raises_data_format_error(row):
    try:
        parsed, dropped = parse_training_row(row, PATH, LINE)
    except DataFormatError as exc:
        assert str(PATH) in str(exc) and str(LINE) in str(exc)
        return
    assert parsed.query == row["query"] and parsed.line == LINE and dropped >= 0
    assert all(isinstance(text, str) and text.strip() for text in (*parsed.pos, *parsed.neg))
