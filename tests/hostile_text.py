"""The texts users send that once crashed the lexical path (issue 40), shared by the property tests
as explicit ``@example`` s beside ``hypothesis.strategies.text()``."""

from __future__ import annotations

#: Characters in the long question (a real question repeated to 10,000 characters).
LONG_QUESTION_CHARS = 10_000

#: Stopwords only, punctuation only (full-width), emoji, digits, Latin, traditional characters,
#: nothing visible (zero-width space), a stopword-only sentence, full-width Latin/digits, a very long question.
HOSTILE_TEXTS: tuple[str, ...] = (
    "是什么",
    "！！！",
    "😀",
    "123",
    "what is this",
    "高血壓",
    "\u200b",
    "是怎么个...",
    "ＡＢＣ１２３",
    ("高血压患者每天应该吃什么药？" * LONG_QUESTION_CHARS)[:LONG_QUESTION_CHARS],
)
