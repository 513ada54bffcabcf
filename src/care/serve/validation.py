"""Text and size rules applied at the service's edge, so that no request can reach the model (and
fail a batch shared with other people's requests) with input the tokenizer or the JSON encoder
cannot take.

Which texts are refused (a lone surrogate, a NUL, nothing visible) is :mod:`care.data.text_rules`,
the rule the benchmark's query check and the BM25 tokeniser share.
"""

from __future__ import annotations

from care.data.text_rules import has_surrogate_or_nul, text_problem

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

def check_text(text: str, what: str) -> str:
    """Return ``text``, or raise ``ValueError("{what} ...")`` saying what is wrong with it."""
    problem = text_problem(text)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return text


def check_plain(text: str, what: str) -> str:
    """Names and filter values: no lone surrogate or NUL (they may be empty or invisible)."""
    if has_surrogate_or_nul(text):
        raise ValueError(f"{what} contains a lone surrogate or a NUL character; send valid Unicode text")
    return text
