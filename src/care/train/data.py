"""The training-data format (FlagEmbedding / CARE-release JSONL), its validation, sampling and batching.

One JSON object per line::

    {"query": str, "pos": [str, ...], "neg": [str, ...],          # required: query, pos (>= 1)
     "prompt"?: str, "type"?: str, "pos_scores"?: [num], "neg_scores"?: [num]}

- ``neg`` may be empty or absent (in-batch negatives only); it is then an error to ask for hard
  negatives (``n_negatives > 0``), reported with the file and line.
- ``prompt``: the query instruction for this example (applied by the trainer to the query side).
- ``type``: ``"query_align"`` / ``"doc_align"`` mark Stage I alignment rows (``query`` is the text
  itself, ``pos == [query]``, ``neg`` = a similar other text, see :mod:`care.train.alignment`); any
  other value, or none, is a retrieval row.
- ``pos_scores`` / ``neg_scores``: optional teacher scores (FlagEmbedding's distillation fields), one
  per ``pos`` / ``neg`` item, carried into :class:`TrainingGroup.teacher_scores` for the
  score-distillation baseline. Other keys are ignored.

**A negative that equals one of the row's positives is dropped with a warning**, not an error: it
would teach the model to push a relevant text away (a false negative), and mined files often contain
a few. Texts are compared after stripping surrounding whitespace. Every other problem (missing query,
empty ``pos``, a non-string item, mismatched score lists) raises
:class:`~care.data.errors.DataFormatError` naming the file, line and field.

Sampling follows FlagEmbedding: each time a row is used, one positive is drawn at random and
``n_negatives`` hard negatives are drawn *without* replacement when the row has enough, otherwise
*with* replacement (the list repeated, then sampled). Draws are seeded by ``(seed, epoch, index)``,
so they do not depend on worker count or iteration order.
"""

from __future__ import annotations

import logging
import math
import random
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.data.errors import DataFormatError
from care.data.fields import require_text, require_text_list
from care.data.io import iter_jsonl, write_jsonl

logger = logging.getLogger(__name__)

QUERY_ALIGN = "query_align"
DOC_ALIGN = "doc_align"
RETRIEVAL = "retrieval"
#: Batch kinds, in code order (the kind of a row is its ``type`` when it is an alignment type, else retrieval).
KINDS: tuple[str, ...] = (RETRIEVAL, QUERY_ALIGN, DOC_ALIGN)
#: FlagEmbedding's default group size is 1 positive + 7 hard negatives; so is the paper's Stage II.
DEFAULT_N_NEGATIVES = 7
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
    return value if value.strip() else None


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


def parse_training_row(obj: dict[str, Any], path: str | Path, line: int) -> tuple[TrainingExample, int]:
    """Validate one decoded JSON object; return the example and how many false negatives were dropped.

    Raises:
        DataFormatError: naming ``path``, ``line`` and the field at fault.
    """
    path = Path(path)
    query = require_text(obj, "query", path, line)
    pos = require_text_list(obj, "pos", path, line, allow_empty=False)
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


@dataclass(frozen=True)
class TrainingGroup:
    """One query with the positive and hard negatives drawn for this step.

    ``teacher_scores`` (when the row has ``pos_scores`` and ``neg_scores``) are aligned with
    ``(positive, *negatives)``.
    """

    query: str
    positive: str
    negatives: tuple[str, ...]
    prompt: str | None = None
    type: str | None = None
    teacher_scores: tuple[float, ...] | None = None


def _where(example: TrainingExample) -> tuple[str, int | None]:
    return example.source or "<in-memory examples>", example.line


def build_groups(example: TrainingExample, n_negatives: int = DEFAULT_N_NEGATIVES,
                 rng: random.Random | None = None) -> TrainingGroup:
    """Draw one positive and ``n_negatives`` hard negatives from a row (FlagEmbedding's sampling).

    Negatives are sampled without replacement when the row has at least ``n_negatives``, otherwise
    from the list repeated ``ceil(n / len(neg))`` times (so some repeat).

    Raises:
        DataFormatError: ``n_negatives > 0`` but the row has no negatives (names file and line).
    """
    rng = rng or random.Random()
    if n_negatives < 0:
        raise ValueError(f"n_negatives must be >= 0, got {n_negatives}")
    p = rng.randrange(len(example.pos))
    idx: list[int] = []
    if n_negatives:
        n_avail = len(example.neg)
        if n_avail == 0:
            source, line = _where(example)
            raise DataFormatError(source, f"no hard negatives, but {n_negatives} are requested per query",
                                  line=line, field="neg",
                                  hint="mine hard negatives for this row, or train with n_negatives=0")
        pool = list(range(n_avail))
        if n_avail < n_negatives:
            pool = pool * math.ceil(n_negatives / n_avail)
        idx = rng.sample(pool, n_negatives)
    teacher = None
    if example.pos_scores is not None and example.neg_scores is not None:
        teacher = (example.pos_scores[p], *(example.neg_scores[i] for i in idx))
    return TrainingGroup(example.query, example.pos[p], tuple(example.neg[i] for i in idx),
                         example.prompt, example.type, teacher)


class TrainingGroupDataset:
    """Map-style dataset of :class:`TrainingGroup` s: row ``i`` sampled afresh each epoch.

    Args:
        examples: a list of :class:`TrainingExample` or a :class:`TrainingFile`.
        n_negatives: hard negatives per query (``k``); 0 = in-batch negatives only.
        seed: base seed; the draw for row ``i`` in epoch ``e`` uses ``Random(f"{seed}:{e}:{i}")``.

    Raises:
        DataFormatError: at construction, when ``n_negatives > 0`` and a row has no negatives.
    """

    def __init__(self, examples: Sequence[TrainingExample], n_negatives: int = DEFAULT_N_NEGATIVES,
                 seed: int = 0) -> None:
        self.examples = examples
        self.n_negatives = n_negatives
        self.seed = seed
        self.epoch = 0
        if n_negatives:
            counts = (examples.negative_counts if isinstance(examples, TrainingFile)
                      else [len(e.neg) for e in examples])
            empty = [i for i, c in enumerate(counts) if c == 0]
            if empty:
                first = empty[0]
                line = examples.line_of(first) if isinstance(examples, TrainingFile) else examples[first].line
                source = (str(examples.path) if isinstance(examples, TrainingFile)
                          else examples[first].source or "<in-memory examples>")
                raise DataFormatError(
                    source, f"{len(empty)} row(s) have no hard negatives but n_negatives={n_negatives}",
                    line=line, field="neg",
                    hint="mine hard negatives for these rows (care.train.alignment / curate), or set n_negatives=0",
                )

    def set_epoch(self, epoch: int) -> None:
        """Change the sampling of every row (call at the start of each epoch)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> TrainingGroup:
        rng = random.Random(f"{self.seed}:{self.epoch}:{index}")
        return build_groups(self.examples[index], self.n_negatives, rng)


@dataclass(frozen=True)
class TrainingBatch:
    """Texts of one batch, ready for the encoders.

    Attributes:
        queries: ``B`` query texts (no prompt applied).
        positives: ``B`` texts, ``positives[i]`` belongs to ``queries[i]``.
        negatives: ``B·k`` texts, flattened: query ``i``'s are ``negatives[i*k:(i+1)*k]``
            (reshape the encoded ``[B·k, d]`` to ``[B, k, d]`` for the losses).
        n_negatives: ``k``.
        prompts: per-query instruction or ``None``.
        types: per-row ``type`` field or ``None``.
        teacher_scores: ``B`` rows of ``1 + k`` scores aligned with (positive, negatives), or
            ``None`` unless every row has them.
    """

    queries: list[str]
    positives: list[str]
    negatives: list[str]
    n_negatives: int
    prompts: list[str | None]
    types: list[str | None]
    teacher_scores: list[list[float]] | None = None

    def __len__(self) -> int:
        return len(self.queries)


def collate_groups(groups: Sequence[TrainingGroup]) -> TrainingBatch:
    """Collate groups into a :class:`TrainingBatch` (use as a DataLoader's ``collate_fn``).

    Raises:
        ValueError: groups with different numbers of negatives, or an empty batch.
    """
    if not groups:
        raise ValueError("cannot collate an empty batch")
    k = len(groups[0].negatives)
    if any(len(g.negatives) != k for g in groups):
        raise ValueError("every group in a batch must have the same number of negatives")
    teacher = None
    if all(g.teacher_scores is not None for g in groups):
        teacher = [list(g.teacher_scores) for g in groups]  # type: ignore[arg-type]
    return TrainingBatch(
        queries=[g.query for g in groups],
        positives=[g.positive for g in groups],
        negatives=[n for g in groups for n in g.negatives],
        n_negatives=k,
        prompts=[g.prompt for g in groups],
        types=[g.type for g in groups],
        teacher_scores=teacher,
    )


class KindGroupedBatchSampler:
    """Yield index batches in which every row has the same kind (FlagEmbedding's "same dataset in batch").

    Stage I mixes query-side and document-side alignment rows; keeping each batch to one kind makes
    the in-batch negatives comparable texts. Rows are shuffled within each kind, cut into *global*
    batches of ``batch_size * num_replicas`` rows, and the global batches of all kinds are shuffled
    together; rank ``r`` takes slice ``r`` of each global batch, so all ranks see the same kind at the
    same step and equal local batch sizes. Seeded by ``(seed, epoch)``.

    Args:
        kinds: the kind (or any grouping key) of every row, e.g. ``TrainingFile.kinds``.
        batch_size: rows per rank per batch.
        seed: shuffling seed.
        drop_last: drop each kind's incomplete last global batch. Forced when ``num_replicas > 1``
            (ranks must get equal batches).
        shuffle: shuffle rows and batches (False: file order within kinds, kinds in first-seen order).
        num_replicas, rank: data-parallel world size and this process's rank.
    """

    def __init__(self, kinds: Sequence[str], batch_size: int, *, seed: int = 0, drop_last: bool = False,
                 shuffle: bool = True, num_replicas: int = 1, rank: int = 0) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside a world of {num_replicas}")
        self.kinds = list(kinds)
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.drop_last = drop_last or num_replicas > 1
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for a new epoch."""
        self.epoch = epoch

    def _global_batches(self) -> list[list[int]]:
        rng = random.Random(f"{self.seed}:{self.epoch}")
        by_kind: dict[str, list[int]] = {}
        for i, kind in enumerate(self.kinds):
            by_kind.setdefault(kind, []).append(i)
        size = self.batch_size * self.num_replicas
        batches: list[list[int]] = []
        for rows in by_kind.values():
            if self.shuffle:
                rng.shuffle(rows)
            for start in range(0, len(rows), size):
                chunk = rows[start:start + size]
                if len(chunk) == size or not self.drop_last:
                    batches.append(chunk)
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self._global_batches():
            yield batch[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]

    def __len__(self) -> int:
        size = self.batch_size * self.num_replicas
        counts: dict[str, int] = {}
        for kind in self.kinds:
            counts[kind] = counts.get(kind, 0) + 1
        return sum(c // size if self.drop_last else math.ceil(c / size) for c in counts.values())
