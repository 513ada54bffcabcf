"""Matryoshka truncation of the document embedding to the query encoder's width.

The document encoder is trained with a Matryoshka (MRL) loss, so the first ``output_dim`` coordinates
of its pooled embedding are themselves a good embedding; CARE keeps exactly those so that documents
and queries share one space (paper: the LLM's embedding is cut to the BERT width).

The cut is stored as sentence-transformers' built-in :class:`Dense` module with a fixed, frozen
``[I | 0]`` weight (no bias, identity activation): ``y = x[:output_dim]``. A custom module class would
need ``trust_remote_code=True`` to load (sentence-transformers >= 6 refuses non-library module classes
otherwise); a built-in keeps ``SentenceTransformer(path)`` working everywhere, mteb included. The
matrix costs ``output_dim * native_dim`` numbers (7.9 MB for 768 x 2560 in float32).
"""

from __future__ import annotations

import torch
from sentence_transformers.sentence_transformer.modules import Dense
from torch import nn

from care.errors import CareError


def matryoshka_truncation(native_dim: int, output_dim: int, *, dtype: torch.dtype | None = None) -> Dense:
    """A frozen Dense module that returns the first ``output_dim`` of ``native_dim`` coordinates."""
    if not 0 < output_dim <= native_dim:
        raise CareError(
            f"Matryoshka output_dim {output_dim} must be between 1 and the document encoder's width {native_dim}"
        )
    weight = torch.eye(output_dim, native_dim, dtype=dtype or torch.float32)
    module = Dense(native_dim, output_dim, bias=False, activation_function=nn.Identity(), init_weight=weight)
    freeze_truncation(module)
    return module


def is_matryoshka_truncation(module: nn.Module) -> bool:
    """True for a Dense module whose weight is exactly ``[I | 0]`` with no bias and no activation."""
    if not isinstance(module, Dense) or module.bias or not isinstance(module.activation_function, nn.Identity):
        return False
    if getattr(module, "use_residual", False):
        return False
    weight = module.linear.weight.detach()
    expected = torch.eye(module.out_features, module.in_features, dtype=weight.dtype, device=weight.device)
    return bool(torch.equal(weight, expected))


def freeze_truncation(module: nn.Module) -> None:
    """The cut is a selection, not a layer to learn: keep its weight out of every optimiser."""
    for param in module.parameters():
        param.requires_grad = False
