"""Training rows sampled into groups and batches: what the trainer's data loader yields.

The rows themselves (format, validation, files) are :mod:`care.data.training`. Sampling follows
FlagEmbedding: each time a row is used, one positive is drawn at random and ``n_negatives`` hard
negatives are drawn *without* replacement when the row has enough, otherwise *with* replacement (the
list repeated, then sampled). Draws are seeded by ``(seed, epoch, index)``, so they do not depend on
worker count or iteration order.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from care.data.errors import DataFormatError
from care.data.training import DEFAULT_N_NEGATIVES, TrainingExample, TrainingFile

logger = logging.getLogger(__name__)


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
                    hint="mine hard negatives for these rows (care.train.recipes.alignment_data / curate), or set n_negatives=0",
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
