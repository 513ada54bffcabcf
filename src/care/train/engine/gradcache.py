"""GradCache: contrastive gradients of a large batch computed in small chunks (Gao et al., 2021).

In-batch negatives make the loss of one example depend on every other example of the batch, so
plain gradient accumulation (several small batches) shrinks the set of negatives. GradCache keeps
the whole batch in the loss while holding only one chunk's activations at a time:

1. encode every chunk **without** grad, remembering the RNG state before each chunk (dropout);
2. compute the loss on the full batch of (detached, grad-requiring) embeddings and back-propagate
   to the embeddings only;
3. re-encode each chunk **with** grad under the saved RNG state and back-propagate the cached
   embedding gradients into the parameters (``emb.backward(grad)``).

The parameter gradients equal those of the full batch in one pass (tested), up to float error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

Features = dict[str, Any]
#: Runs one tower on tokenised features and returns ``[n, d]`` embeddings.
EncodeFn = Callable[[str, Features], torch.Tensor]


@dataclass
class EncodeJob:
    """Texts of one batch field (e.g. ``"positive"``) to be encoded by one trainable tower.

    features: the tower's tokenised inputs for all rows (tensors with the batch on dim 0).
    """

    name: str
    tower: str
    features: Features
    n_rows: int


def slice_features(features: Features, start: int, stop: int) -> Features:
    """Rows ``start:stop`` of every batch-shaped tensor; other values are passed through."""
    out = {}
    for key, value in features.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1:
            out[key] = value[start:stop]
        elif isinstance(value, list):
            out[key] = value[start:stop]
        else:
            out[key] = value
    return out


class RandState:
    """CPU (and current CUDA device) RNG state captured before a chunk, restorable for its re-run."""

    def __init__(self, device: torch.device) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda_device = device if device.type == "cuda" else None
        self.cuda = torch.cuda.get_rng_state(device) if self.cuda_device is not None else None

    @contextlib.contextmanager
    def restored(self) -> Iterator[None]:
        devices = [self.cuda_device] if self.cuda_device is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda_device is not None:
                torch.cuda.set_rng_state(self.cuda, self.cuda_device)
            yield


def grad_cache_step(
    jobs: list[EncodeJob],
    encode: EncodeFn,
    loss_fn: Callable[[Mapping[str, torch.Tensor]], Any],
    *,
    chunk_size: int,
    backward: Callable[[torch.Tensor], None],
    device: torch.device,
    no_sync: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> Any:
    """One forward/backward of a batch with GradCache. Parameter gradients are accumulated in ``.grad``.

    Args:
        jobs: what to encode, per batch field.
        encode: ``encode(tower, features) -> [n, d]`` (runs the (possibly DDP-wrapped) model).
        loss_fn: maps ``{job.name: embeddings}`` to the loss (a tensor or a ``LossOutput``).
        chunk_size: rows per chunk.
        backward: how to back-propagate the scalar loss (``accelerator.backward``; applies loss
            scaling / accumulation division once, here).
        device: model device (for the CUDA RNG state).
        no_sync: context manager that suspends DDP gradient all-reduce; every chunk but the very
            last re-run uses it so parameters are reduced once per step.
    Returns:
        Whatever ``loss_fn`` returned (its tensors detached from the graph by then).
    """
    states: dict[str, list[RandState]] = {}
    cached: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for job in jobs:
            states[job.name], parts = [], []
            for start in range(0, job.n_rows, chunk_size):
                states[job.name].append(RandState(device))
                parts.append(encode(job.tower, slice_features(job.features, start, start + chunk_size)))
            cached[job.name] = torch.cat(parts).detach().float().requires_grad_()
    out = loss_fn(cached)
    loss = out if isinstance(out, torch.Tensor) else out.loss
    backward(loss)
    # fields the loss did not use (e.g. a λ set to 0) have no gradient and are not re-run
    chunks = [(job, i, start) for job in jobs if cached[job.name].grad is not None
              for i, start in enumerate(range(0, job.n_rows, chunk_size))]
    for n, (job, i, start) in enumerate(chunks):
        grad = cached[job.name].grad
        last = n == len(chunks) - 1
        ctx = no_sync() if (no_sync is not None and not last) else contextlib.nullcontext()
        with ctx, states[job.name][i].restored():
            emb = encode(job.tower, slice_features(job.features, start, start + chunk_size))
            emb.float().backward(grad[start : start + chunk_size])
    return out
