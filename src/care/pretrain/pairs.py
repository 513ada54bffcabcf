"""Unsupervised (title, content) pairs for contrastive pretraining, from texts that have no titles.

The paper pretrains on web (title, content) pairs. Chinese medical QA corpora such as the dev set
``toyhom_neike_sample`` have no document titles (its ``corpus.jsonl`` holds only ``id`` and ``text``;
the source's ``title`` column is the patient's question, which became the *query* of the supervised
pairs in ``train.jsonl``). Two ways to get pairs:

* ``split`` (default; label-free): each text is cut after its first sentence (Chinese or Western
  sentence punctuation): ``title`` = the first sentence, ``content`` = the rest — the inverse-cloze
  style pair used by unsupervised dense-retrieval pretraining. Texts whose first sentence or rest is
  shorter than ``min_chars`` characters are skipped, and so is BEIR's title-only document (a title and
  an empty text: nothing to split; :func:`care.data.retrieval.is_title_only`).
* ``fields``: two existing fields become the pair, e.g. ``(query, positive)`` of a training file
  (``positive`` and ``pos`` are read for each other, as the training reader does); a row where either
  field is a string that shows nothing (BEIR's empty titles) is skipped.
  Note that these are the SUPERVISED pairs ``init_query`` trains on later, so using them here is not
  unsupervised pretraining.

Output: JSONL ``{"title", "content"}`` (the default ``data.pair_fields`` of contrastive configs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from care.data.errors import DataFormatError
from care.data.fields import require_text
from care.data.io import iter_jsonl, write_jsonl
from care.data.retrieval import is_title_only
from care.data.text_rules import has_visible
from care.data.training import POSITIVES, POSITIVES_SYNONYM

#: A sentence ends at one of these (kept with the sentence).
SENTENCE_END = re.compile(r"[。！？!?；;]+|\.(?=\s)")
DEFAULT_MIN_CHARS = 4
PAIR_MODES: tuple[str, ...] = ("split", "fields")
#: The two spellings of a training row's positives: either is read when the other is asked for.
POSITIVE_SPELLINGS: tuple[str, ...] = (POSITIVES_SYNONYM, POSITIVES)


def split_first_sentence(text: str, min_chars: int = DEFAULT_MIN_CHARS) -> tuple[str, str] | None:
    """``(first sentence, rest)`` of ``text``, or ``None`` when either part is shorter than ``min_chars``."""
    text = " ".join(text.split())
    match = SENTENCE_END.search(text)
    if match is None:
        return None
    head, rest = text[:match.end()].strip(), text[match.end():].strip()
    if len(head) < min_chars or len(rest) < min_chars:
        return None
    return head, rest


def _field_text(obj: dict, key: str, path: Path, line: int) -> str:
    if key not in obj and key in POSITIVE_SPELLINGS:  # a training file's positives, spelt either way
        key = next((k for k in POSITIVE_SPELLINGS if k in obj), key)
    value = obj.get(key)
    if isinstance(value, list) and value:
        obj = {key: value[0]}
    return " ".join(require_text(obj, key, path, line).split())


def _shows_nothing(obj: dict, key: str) -> bool:
    """A string field with nothing visible (BEIR's empty titles): the row has no pair to give."""
    value = obj.get(key)
    return isinstance(value, str) and not has_visible(value)


def iter_pairs(inputs: Sequence[str | Path], *, mode: str = "split", text_field: str = "text",
               fields: tuple[str, str] = ("query", "positive"), min_chars: int = DEFAULT_MIN_CHARS,
               stats: dict[str, int] | None = None) -> Iterator[dict[str, str]]:
    """Stream ``{"title", "content"}`` pairs from JSONL ``inputs`` (see the module docstring)."""
    if mode not in PAIR_MODES:
        raise ValueError(f"unknown pair mode {mode!r}; use one of {PAIR_MODES}")
    stats = stats if stats is not None else {}
    stats.setdefault("pairs", 0)
    stats.setdefault("skipped", 0)
    for path in map(Path, inputs):
        for line, obj in iter_jsonl(path):
            if mode == "split":
                pair = (None if is_title_only(obj, text_field)
                        else split_first_sentence(_field_text(obj, text_field, path, line), min_chars))
            else:
                if len(fields) != 2:
                    raise DataFormatError(path, f"'fields' mode needs two field names, got {list(fields)}")
                pair = (None if _shows_nothing(obj, fields[0]) or _shows_nothing(obj, fields[1]) else
                        (_field_text(obj, fields[0], path, line), _field_text(obj, fields[1], path, line)))
            if pair is None:
                stats["skipped"] += 1
                continue
            stats["pairs"] += 1
            yield {"title": pair[0], "content": pair[1]}


def make_pairs(inputs: Sequence[str | Path], output: str | Path, **options) -> dict[str, int]:
    """Write :func:`iter_pairs` to ``output`` atomically; returns ``{"pairs", "skipped"}``."""
    stats: dict[str, int] = {}
    write_jsonl(output, iter_pairs(inputs, stats=stats, **options))
    return stats
