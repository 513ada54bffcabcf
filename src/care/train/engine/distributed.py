"""Cross-device in-batch negatives: an all-gather that keeps gradients, and the matching labels.

With data parallelism each rank holds ``B`` queries and their candidates. Contrastive losses get
more negatives when every rank scores its queries against the candidates of *all* ranks. Two
things must hold for that to be correct:

1. **Gradients flow through the gathered copies.** :func:`gather_with_grad` uses
   :func:`torch.distributed.nn.functional.all_gather`, whose backward sums, on every rank, the
   gradients that *all* ranks' losses send to that rank's local slice (a reduce-scatter; emulated
   with all-to-all on gloo). This is exact, unlike the "gather without grad, then put the local
   slice back" trick, which drops the gradient other ranks' losses send to this rank's candidates.
2. **Labels stay aligned.** Rank ``r``'s local query ``i`` has its positive at row
   ``offset_r + i`` of the gathered positives, where ``offset_r`` is the number of rows on ranks
   ``0..r-1`` (``r * B`` when every rank holds ``B``): :func:`global_positive_labels`.

Gradient scaling (DDP semantics). Each rank computes the mean loss over its own ``B`` queries,
``L_r``. Because of (1), the gradient that reaches rank ``r``'s inputs is ``sum_r' dL_r'/dx_r``,
which is ``W`` times the gradient of the single-process loss on the combined batch
(``L = mean_r L_r``). DistributedDataParallel then *averages* parameter gradients over the ``W``
ranks, dividing by ``W`` again, so the parameter update equals the single-process update on the
combined batch. Do not rescale the loss by the world size.

All functions are no-ops (identity, local labels) when ``torch.distributed`` is not initialised
or the world has one process, so the same training code runs on one CPU and on many GPUs.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    """True when a process group with more than one process is initialised."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Number of processes (1 when not distributed)."""
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    """This process's rank (0 when not distributed)."""
    return dist.get_rank() if is_distributed() else 0


def _gather_sizes(n: int, device: torch.device) -> list[int]:
    local = torch.tensor([n], dtype=torch.long, device=device)
    sizes = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, local)
    return [int(s.item()) for s in sizes]


def gather_with_grad_and_sizes(x: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """All-gather ``x`` along dim 0 from every rank, keeping gradients; also return each rank's row count.

    Ranks may hold different numbers of rows (e.g. a short last batch): rows are padded to the
    largest count for the collective and the padding is cut away afterwards.

    Args:
        x: ``[n_r, ...]`` local tensor (same trailing shape and dtype on every rank).
    Returns:
        ``(gathered, sizes)``: ``[sum_r n_r, ...]`` rows in rank order, and ``[n_0, ..., n_{W-1}]``.
        Not distributed: ``(x, [len(x)])``.
    """
    if not is_distributed():
        return x, [x.shape[0]]
    from torch.distributed.nn.functional import all_gather

    sizes = _gather_sizes(x.shape[0], x.device)
    largest = max(sizes)
    padded = x
    if x.shape[0] < largest:
        pad = x.new_zeros((largest - x.shape[0], *x.shape[1:]))
        padded = torch.cat([x, pad], dim=0)
    parts = all_gather(padded)
    return torch.cat([part[:n] for part, n in zip(parts, sizes)], dim=0), sizes


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """All-gather ``x`` along dim 0 from every rank, keeping gradients (identity when not distributed).

    Args:
        x: ``[n_r, ...]`` local tensor.
    Returns:
        ``[sum_r n_r, ...]``: rank 0's rows, then rank 1's, ... This rank's rows are the local
        tensor itself, so its gradient flows directly; other ranks' rows carry their gradient back
        to their owners in the backward pass (see the module docstring for the scaling).
    """
    return gather_with_grad_and_sizes(x)[0]


def global_positive_labels(local_batch: int, rank: int, *, offset: int | None = None,
                           device: torch.device | str | None = None) -> torch.Tensor:
    """Labels of this rank's queries among the gathered positives.

    Args:
        local_batch: ``B``, queries on this rank.
        rank: this rank's index ``r`` (0 when not distributed).
        offset: rows held by ranks ``0..r-1``; defaults to ``rank * local_batch`` (equal batches).
        device: where to create the labels.
    Returns:
        ``LongTensor [B]`` = ``offset + arange(B)``.
    """
    start = rank * local_batch if offset is None else offset
    return torch.arange(start, start + local_batch, dtype=torch.long, device=device)
