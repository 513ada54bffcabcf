"""Deterministic, resumable per-epoch data loaders over a training file.

Built from :mod:`care.train.engine.data`: a :class:`~care.train.engine.data.TrainingGroupDataset` (one positive +
``k`` hard negatives per row, drawn with a generator seeded by ``(seed, epoch, row)``) and a
:class:`~care.train.engine.data.KindGroupedBatchSampler` (batches of one kind — retrieval, query-side or
document-side alignment — shuffled by ``(seed, epoch)``, sliced per data-parallel rank). A batch
therefore depends only on ``(seed, epoch, position)``: a resumed run skips the first ``n`` index
batches of the epoch (without loading them) and then sees exactly what the uninterrupted run saw.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils.data import DataLoader

from care.data.training import DOC_ALIGN
from care.encoders.base import format_instruction
from care.train.engine.data import KindGroupedBatchSampler, TrainingBatch, TrainingGroupDataset, collate_groups

#: Rows whose query side is a document text: never given the retrieval instruction.
UNINSTRUCTED_TYPES: frozenset[str] = frozenset({DOC_ALIGN})


def query_text(query: str, prompt: str | None, type_: str | None, default_prompt: str | None) -> str:
    """The query as the query encoder sees it.

    A row's own ``prompt`` is applied in the paper's instruction format
    (``Instruct: {prompt}\\nQuery: {query}``); otherwise ``default_prompt`` (``model.query_prompt``) is
    prefixed — also to Stage I query-side rows (``query_align``), so the query encoder is aligned on
    queries exactly as it will see them at search time (an unseen instruction prefix would move every
    query embedding at inference) — but not to document-side rows (``doc_align``), whose "query" is a
    document text. The teacher side of alignment rows never gets an instruction.
    """
    if prompt:
        return format_instruction(prompt, query)
    if default_prompt and type_ not in UNINSTRUCTED_TYPES:
        return default_prompt + query
    return query


def batch_queries(batch: TrainingBatch, default_prompt: str | None) -> list[str]:
    """The query texts of ``batch`` with instructions applied (see :func:`query_text`)."""
    return [query_text(q, p, t, default_prompt) for q, p, t in zip(batch.queries, batch.prompts, batch.types)]


class _SkipFirst:
    """A batch sampler without its first ``skip`` batches (resume: nothing of them is loaded)."""

    def __init__(self, sampler: KindGroupedBatchSampler, skip: int) -> None:
        self.sampler, self.skip = sampler, skip

    def __iter__(self):
        for i, batch in enumerate(self.sampler):
            if i >= self.skip:
                yield batch

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.skip)


def epoch_loader(examples: Sequence, kinds: Sequence[str], *, batch_size: int, n_negatives: int, seed: int,
                 epoch: int, shuffle: bool, num_replicas: int = 1, rank: int = 0, skip_batches: int = 0,
                 num_workers: int = 0) -> DataLoader:
    """The DataLoader of one epoch for one rank, yielding :class:`~care.train.engine.data.TrainingBatch` es.

    Args:
        examples: training rows (a list or a :class:`~care.train.engine.data.TrainingFile`).
        kinds: batch kind of each row (``TrainingFile.kinds`` or computed from the rows).
        batch_size: rows per rank per batch.
        skip_batches: batches of this epoch already consumed (resume).
    """
    dataset = TrainingGroupDataset(examples, n_negatives=n_negatives, seed=seed)
    dataset.set_epoch(epoch)
    sampler = KindGroupedBatchSampler(kinds, batch_size, seed=seed, shuffle=shuffle, num_replicas=num_replicas,
                                      rank=rank)
    sampler.set_epoch(epoch)
    batch_sampler = _SkipFirst(sampler, skip_batches) if skip_batches else sampler
    # A private generator: creating a DataLoader iterator draws a base seed from its generator, and
    # drawing from the global RNG would shift the dropout stream of a resumed run.
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return DataLoader(dataset, batch_sampler=batch_sampler, collate_fn=collate_groups, num_workers=num_workers,
                      generator=generator)


def batches_per_epoch(kinds: Sequence[str], batch_size: int, num_replicas: int = 1) -> int:
    """Batches each rank sees per epoch."""
    return len(KindGroupedBatchSampler(kinds, batch_size, num_replicas=num_replicas))
