"""Text and size rules applied at the service's edge, so that no request can reach the model (and
fail a batch shared with other people's requests) with input the tokenizer or the JSON encoder
cannot take.

A text is refused when it holds a lone UTF-16 surrogate (JSON ``"\\ud800"`` decodes to one: it is
not a character, UTF-8 cannot encode it and tokenizers raise), a NUL character, or nothing visible
(only whitespace, zero-width and other format characters such as U+200B or U+FEFF).
"""

from __future__ import annotations

import re
import unicodedata

#: Longest accepted instruction (characters). The paper's task instructions are about 90 characters;
#: 16x that leaves room for long custom prompts while bounding the encoder's work per request.
MAX_INSTRUCTION_CHARS = 1536
#: Most metadata fields in one ``filters`` object (a document has a handful of metadata fields).
MAX_FILTER_FIELDS = 32
#: Most values in one ``filters`` list ("any of"): enough for every department of a hospital.
MAX_FILTER_VALUES = 256
#: Longest filter field name or string value (characters).
MAX_FILTER_TEXT_CHARS = 256
#: Longest ``model`` / ``user`` string of ``/v1/embeddings`` (OpenAI ids are well below it).
MAX_NAME_CHARS = 256

_SURROGATE = re.compile("[\ud800-\udfff]")
_NUL = "\x00"
#: Characters that show nothing: Unicode "format" (Cf: zero-width space / joiners, BOM, bidi marks)
#: and "control" (Cc) categories, besides whitespace.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc"})


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be encoded (a sentence a person understands), or None when it is fine."""
    bad = _SURROGATE.search(text)
    if bad is not None:
        return (f"contains a lone surrogate (U+{ord(bad.group()):04X}) at character {bad.start()}; that is not a valid "
                "Unicode character — send real text (a \\uD800-\\uDFFF escape must be half of a surrogate pair)")
    if _NUL in text:
        return f"contains a NUL character (\\u0000) at character {text.index(_NUL)}; remove control characters"
    if not any(not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES for ch in text):
        return "has no visible characters (only spaces or zero-width characters); send some text"
    return None


def check_text(text: str, what: str) -> str:
    """Return ``text``, or raise ``ValueError("{what} ...")`` saying what is wrong with it."""
    problem = text_problem(text)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return text


def check_plain(text: str, what: str) -> str:
    """Names and filter values: no lone surrogate or NUL (they may be empty or invisible)."""
    if _SURROGATE.search(text) or _NUL in text:
        raise ValueError(f"{what} contains a lone surrogate or a NUL character; send valid Unicode text")
    return text
