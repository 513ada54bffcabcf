"""The training-data format (FlagEmbedding / CARE-release JSONL): rows, validation, reading and writing.

One JSON object per line::

    {"query": str, "pos": [str, ...], "neg": [str, ...],          # required: query, pos (>= 1)
     "prompt"?: str, "type"?: str, "pos_scores"?: [num], "neg_scores"?: [num]}

- ``pos`` may be one string (``"pos": "one answer"``) and may be spelt ``positive`` (pairs files,
  sentence-transformers' column name); a row with both is refused. ``neg`` may be one string too.

- ``neg`` may be empty or absent (in-batch negatives only); it is then an error to ask for hard
  negatives (``n_negatives > 0``), reported with the file and line.
- ``prompt``: the query instruction for this example (applied by the trainer to the query side).
- ``type``: ``"query_align"`` / ``"doc_align"`` mark Stage I alignment rows (``query`` is the text
  itself, ``pos == [query]``, ``neg`` = a similar other text, see :mod:`care.train.recipes.alignment_data`); any
  other value, or none, is a retrieval row.
- ``pos_scores`` / ``neg_scores``: optional teacher scores (FlagEmbedding's distillation fields), one
  per ``pos`` / ``neg`` item, carried into :class:`TrainingGroup.teacher_scores` for the
  score-distillation baseline. Other keys are ignored.

**A negative that equals one of the row's positives is dropped with a warning**, not an error: it
would teach the model to push a relevant text away (a false negative), and mined files often contain
a few. Texts are compared after stripping surrounding whitespace. Every other problem (missing query,
empty ``pos``, a non-string item, mismatched score lists) raises
:class:`~care.data.errors.DataFormatError` naming the file, line and field.

How rows are sampled into training batches is :mod:`care.train.engine.data`'s business.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import require_text, require_text_list
from care.data.io import iter_jsonl, write_jsonl
from care.data.text_rules import has_visible

logger = logging.getLogger(__name__)

QUERY_ALIGN = "query_align"
DOC_ALIGN = "doc_align"
RETRIEVAL = "retrieval"
#: Batch kinds, in code order (the kind of a row is its ``type`` when it is an alignment type, else retrieval).
KINDS: tuple[str, ...] = (RETRIEVAL, QUERY_ALIGN, DOC_ALIGN)
#: FlagEmbedding's default group size is 1 positive + 7 hard negatives; so is the paper's Stage II.
DEFAULT_N_NEGATIVES = 7
#: The positives' field, and the synonym accepted for it (pairs files; sentence-transformers' column name).
POSITIVES, POSITIVES_SYNONYM = "pos", "positive"
#: How many offending lines a "dropped negatives" warning names before summarising.
_MAX_LINES_NAMED = 5


def kind_of(type_: str | None) -> str:
    """Map a row's ``type`` to a batch kind: ``query_align``, ``doc_align`` or ``retrieval``."""
    return type_ if type_ in (QUERY_ALIGN, DOC_ALIGN) else RETRIEVAL


@dataclass(frozen=True)
class TrainingExample:
    """One validated training row.

    Attributes:
        query, pos, neg, prompt, type: the JSON fields (``neg`` without false negatives).
        pos_scores, neg_scores: teacher scores aligned with ``pos`` / ``neg``, or ``None``.
        source, line: where the row came from, for error messages (``None`` when built in memory).
    """

    query: str
    pos: tuple[str, ...]
    neg: tuple[str, ...] = ()
    prompt: str | None = None
    type: str | None = None
    pos_scores: tuple[float, ...] | None = None
    neg_scores: tuple[float, ...] | None = None
    source: str | None = None
    line: int | None = None

    @property
    def kind(self) -> str:
        """``query_align``, ``doc_align`` or ``retrieval``."""
        return kind_of(self.type)

    def to_json(self) -> dict[str, Any]:
        """The JSONL object (optional fields only when set)."""
        row: dict[str, Any] = {"query": self.query, "pos": list(self.pos), "neg": list(self.neg)}
        for key in ("prompt", "type"):
            if getattr(self, key) is not None:
                row[key] = getattr(self, key)
        if self.pos_scores is not None:
            row["pos_scores"] = list(self.pos_scores)
        if self.neg_scores is not None:
            row["neg_scores"] = list(self.neg_scores)
        return row


def _optional_text(obj: dict[str, Any], key: str, path: Path, line: int) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataFormatError(path, f"expected a string, got {type(value).__name__}", line=line, field=key)
    return value if has_visible(value) else None


def _scores(obj: dict[str, Any], key: str, expected: int, path: Path, line: int) -> list[float] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
        raise DataFormatError(path, "expected a list of numbers", line=line, field=key)
    if len(value) != expected:
        list_name = key.removesuffix("_scores")
        raise DataFormatError(
            path, f"{len(value)} scores for {expected} '{list_name}' texts", line=line, field=key,
            hint=f"give exactly one score per item of '{list_name}', or drop '{key}'",
        )
    return [float(v) for v in value]


def read_positives(obj: dict[str, Any], path: str | Path, line: int | None) -> list[str]:
    """A training row's positives: ``pos`` or its synonym ``positive``, a string or a list of strings.

    Raises:
        DataFormatError: neither field, both, or an empty / non-string item — naming the file, line and field.
    """
    path = Path(path)
    if POSITIVES in obj and POSITIVES_SYNONYM in obj:
        raise DataFormatError(path, f"both '{POSITIVES}' and '{POSITIVES_SYNONYM}' given", line=line, field=POSITIVES,
                              hint=f"keep one of them ('{POSITIVES_SYNONYM}' is read as '{POSITIVES}')")
    key = POSITIVES_SYNONYM if POSITIVES_SYNONYM in obj else POSITIVES
    return require_text_list(obj, key, path, line, allow_empty=False)


def parse_training_row(obj: dict[str, Any], path: str | Path, line: int) -> tuple[TrainingExample, int]:
    """Validate one decoded JSON object; return the example and how many false negatives were dropped.

    Raises:
        DataFormatError: naming ``path``, ``line`` and the field at fault.
    """
    path = Path(path)
    query = require_text(obj, "query", path, line)
    pos = read_positives(obj, path, line)
    neg = require_text_list(obj, "neg", path, line, allow_empty=True) if obj.get("neg") is not None else []
    pos_scores = _scores(obj, "pos_scores", len(pos), path, line)
    neg_scores = _scores(obj, "neg_scores", len(neg), path, line)
    positives = {p.strip() for p in pos}
    keep = [i for i, n in enumerate(neg) if n.strip() not in positives]
    dropped = len(neg) - len(keep)
    example = TrainingExample(
        query=query,
        pos=tuple(pos),
        neg=tuple(neg[i] for i in keep),
        prompt=_optional_text(obj, "prompt", path, line),
        type=_optional_text(obj, "type", path, line),
        pos_scores=None if pos_scores is None else tuple(pos_scores),
        neg_scores=None if neg_scores is None else tuple(neg_scores[i] for i in keep),
        source=str(path),
        line=line,
    )
    return example, dropped


class _DropReport:
    """Collects rows that lost false negatives and logs one warning per file."""

    def __init__(self, path: Path) -> None:
        self.path, self.lines, self.count = path, [], 0

    def add(self, line: int, dropped: int) -> None:
        if dropped:
            self.count += dropped
            self.lines.append(line)

    def log(self) -> None:
        if self.count:
            named = ", ".join(map(str, self.lines[:_MAX_LINES_NAMED]))
            more = f" and {len(self.lines) - _MAX_LINES_NAMED} more" if len(self.lines) > _MAX_LINES_NAMED else ""
            logger.warning("%s: dropped %d negative(s) identical to a positive of the same query (lines %s%s)",
                           self.path, self.count, named, more)


def iter_training_file(path: str | Path) -> Iterator[TrainingExample]:
    """Stream validated examples from a training JSONL file (constant memory).

    Raises:
        DataFormatError: a bad line (named), or a file without any example.
    """
    path = Path(path)
    report = _DropReport(path)
    n = 0
    for line, obj in iter_jsonl(path):
        example, dropped = parse_training_row(obj, path, line)
        report.add(line, dropped)
        n += 1
        yield example
    report.log()
    if n == 0:
        raise DataFormatError(path, "no training examples",
                              hint='add lines like {"query": "...", "pos": ["..."], "neg": ["..."]}')


def load_training_file(path: str | Path, max_examples: int | None = None) -> list[TrainingExample]:
    """Load and validate a whole training file into memory (first ``max_examples`` rows if given)."""
    rows = []
    for example in iter_training_file(path):
        if max_examples is not None and len(rows) >= max_examples:
            break
        rows.append(example)
    return rows


def write_training_file(path: str | Path, examples: Iterable[TrainingExample | dict[str, Any]]) -> int:
    """Atomically write examples (or already-built row dicts) as training JSONL; returns the row count."""
    return write_jsonl(path, (e.to_json() if isinstance(e, TrainingExample) else e for e in examples))


class TrainingFile(Sequence[TrainingExample]):
    """Random access to a validated training file without holding its texts in memory.

    Opening makes one streaming pass that validates every line and records its byte offset, batch
    kind and negative count (a few bytes per row); ``file[i]`` then seeks to row ``i`` and parses it.
    Works as a map-style ``torch.utils.data.Dataset`` source, also with worker processes (each
    process opens its own handle).

    Args:
        path: the JSONL file.
        max_examples: keep only the first rows.
    """

    def __init__(self, path: str | Path, max_examples: int | None = None) -> None:
        self.path = Path(path)
        self._offsets = array("q")
        self._lines = array("q")
        self._kinds = array("b")
        self._n_neg = array("l")
        report = _DropReport(self.path)
        for line, offset, text in _iter_lines_with_offsets(self.path):
            if not text.strip():
                continue
            if max_examples is not None and len(self._offsets) >= max_examples:
                break
            example, dropped = parse_training_row(_decode_line(self.path, line, text), self.path, line)
            report.add(line, dropped)
            self._offsets.append(offset)
            self._lines.append(line)
            self._kinds.append(KINDS.index(example.kind))
            self._n_neg.append(len(example.neg))
        report.log()
        if not self._offsets:
            raise DataFormatError(self.path, "no training examples",
                                  hint='add lines like {"query": "...", "pos": ["..."], "neg": ["..."]}')
        self._fh: Any = None

    def __len__(self) -> int:
        return len(self._offsets)

    def __getitem__(self, index: int) -> TrainingExample:  # type: ignore[override]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if self._fh is None:
            self._fh = self.path.open("rb")
        self._fh.seek(self._offsets[index])
        line = self._lines[index]
        text = self._fh.readline().decode("utf-8").lstrip("\ufeff")
        return parse_training_row(_decode_line(self.path, line, text), self.path, line)[0]

    @property
    def kinds(self) -> list[str]:
        """Batch kind of every row (for :class:`KindGroupedBatchSampler`)."""
        return [KINDS[k] for k in self._kinds]

    @property
    def negative_counts(self) -> list[int]:
        """Number of (kept) hard negatives of every row."""
        return list(self._n_neg)

    def line_of(self, index: int) -> int:
        """1-based line number of row ``index``."""
        return self._lines[index]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fh"] = None
        return state

    def close(self) -> None:
        """Close the read handle (reopened on the next access)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _iter_lines_with_offsets(path: Path) -> Iterator[tuple[int, int, str]]:
    """Yield ``(line_number, byte_offset, text)``; same errors as :func:`care.data.io.iter_text_lines`."""
    if not path.is_file():
        raise DataFormatError(path, "file not found", hint="check the path, or create the file")
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", line=lineno,
                                      hint="re-encode the file as UTF-8") from None
            yield lineno, offset, text.lstrip("\ufeff").rstrip("\r\n")
            offset += len(raw)


def _decode_line(path: Path, line: int, text: str) -> dict[str, Any]:
    """Decode one JSONL line with :func:`care.data.io.iter_jsonl`'s error messages."""
    from care.data.io import decode_json_object

    return decode_json_object(path, line, text, '{"query": ..., "pos": [...]}')
