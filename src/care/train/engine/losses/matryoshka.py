"""Matryoshka (MRL) wrapper: apply any embedding loss at several nested widths and average."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class MatryoshkaLoss(nn.Module):
    r"""Average a loss over nested prefixes of the embeddings (Kusupati et al. 2022).

    Equation (the paper's document-encoder initialisation loss)::

        L_MRL = sum_m w_m · L(trunc_m(x_1), trunc_m(x_2), ...) / sum_m w_m,
        trunc_m(x) = norm(x[..., :m])

    With ``weights=None`` every ``w_m = 1``, i.e. the plain mean over the dims. Every *floating
    tensor argument with at least 2 dimensions* (positional or keyword) is treated as embeddings and
    cut to its first ``m`` features then re-L2-normalised (``renormalize``); other arguments (``None``,
    numbers, integer labels) pass through unchanged. Do not wrap a loss that takes other float
    matrices (e.g. teacher scores).

    Args:
        loss: the wrapped loss module returning a scalar (e.g. :class:`InfoNCELoss`).
        dims: nested widths, e.g. ``(768, 1024, 2048, 4096)``; each must not exceed the input width.
        weights: one non-negative weight per dim (``None``: equal weights).
        renormalize: L2-normalise after truncation (a prefix of a unit vector is not unit).
    """

    def __init__(self, loss: nn.Module, dims: Sequence[int], weights: Sequence[float] | None = None,
                 renormalize: bool = True) -> None:
        super().__init__()
        dims = [int(d) for d in dims]
        if not dims or any(d <= 0 for d in dims):
            raise ValueError(f"dims must be a non-empty list of positive widths, got {dims}")
        if len(set(dims)) != len(dims):
            raise ValueError(f"dims must be distinct, got {dims}")
        if weights is None:
            weights = [1.0] * len(dims)
        weights = [float(w) for w in weights]
        if len(weights) != len(dims) or any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"need one non-negative weight per dim (not all zero); dims={dims}, weights={weights}")
        self.loss = loss
        self.dims = dims
        self.weights = weights
        self.renormalize = renormalize

    def _truncate(self, value: Any, dim: int) -> Any:
        if not (isinstance(value, torch.Tensor) and value.is_floating_point() and value.ndim >= 2):
            return value
        if value.shape[-1] < dim:
            raise ValueError(f"MatryoshkaLoss dim {dim} exceeds the embedding width {value.shape[-1]}")
        cut = value[..., :dim]
        return F.normalize(cut, dim=-1) if self.renormalize else cut

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        total = None
        for dim, weight in zip(self.dims, self.weights):
            if weight == 0:
                continue
            value = self.loss(*(self._truncate(a, dim) for a in args),
                              **{k: self._truncate(v, dim) for k, v in kwargs.items()})
            total = weight * value if total is None else total + weight * value
        return total / sum(self.weights)

    def extra_repr(self) -> str:
        return f"dims={self.dims}, weights={self.weights}, renormalize={self.renormalize}"
