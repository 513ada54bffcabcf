"""The query tower: a BERT-style bidirectional encoder with CLS pooling (paper §4, "query encoder").

Built from sentence-transformers modules — ``Transformer -> Pooling(cls) -> Normalize`` — so it is an
ordinary :class:`~sentence_transformers.SentenceTransformer` that saves, loads and trains like any
other. Its output width is the encoder's hidden size, which fixes the width of the whole CARE model.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

from care.errors import CareError

logger = logging.getLogger(__name__)

#: Paper's query length budget (queries are short; 512 covers any realistic one).
DEFAULT_QUERY_MAX_SEQ_LENGTH = 512
#: "lasttoken": a query tower pruned from a decoder LLM (care.models.prune; KALE / Wang & Lyu baselines).
QUERY_POOLING_MODES = ("cls", "mean", "lasttoken")


def model_kwargs_for(dtype: torch.dtype | str | None, trust_remote_code: bool) -> dict[str, Any]:
    """``model_kwargs`` for ``Transformer``: dtype (transformers v5 name) and remote-code trust."""
    kwargs: dict[str, Any] = {}
    if isinstance(dtype, str) and dtype != "auto":
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype):
            raise CareError(f"unknown dtype {dtype!r}; use float32, bfloat16, float16 or auto")
        dtype = resolved
    if dtype is not None:
        kwargs["dtype"] = dtype
    if trust_remote_code:
        kwargs["trust_remote_code"] = True
    return kwargs


def local_path_or_name(model_name_or_path: str | Path) -> str:
    """Absolute path for local folders (so saved references survive a change of working directory)."""
    path = Path(model_name_or_path).expanduser()
    return str(path.resolve()) if path.exists() else str(model_name_or_path)


def build_query_encoder(
    model_name_or_path: str | Path,
    *,
    pooling: str = "cls",
    max_seq_length: int = DEFAULT_QUERY_MAX_SEQ_LENGTH,
    dtype: torch.dtype | str | None = None,
    trust_remote_code: bool = False,
) -> SentenceTransformer:
    """Build the query encoder ``Transformer -> Pooling(pooling) -> Normalize``.

    Args:
        model_name_or_path: a Hugging Face folder or hub id of a bidirectional encoder
            (e.g. ``Alibaba-NLP/gte-multilingual-base`` with ``trust_remote_code=True``, or a tiny BERT
            from :func:`care.models.presets.make_tiny_models`).
        pooling: ``"cls"`` (paper), ``"mean"``, or ``"lasttoken"`` (a decoder pruned by :mod:`care.models.prune`).
        max_seq_length: truncation length in tokens.
        dtype: weights dtype (``torch.bfloat16``, ``"float16"``, ...); None keeps the checkpoint's.
        trust_remote_code: needed for checkpoints with their own modelling code (gte-multilingual).
    Returns:
        A ``SentenceTransformer`` whose ``encode`` gives L2-normalised ``hidden_size``-d vectors.
    """
    if pooling not in QUERY_POOLING_MODES:
        raise CareError(f"query pooling {pooling!r} is not supported; use one of {QUERY_POOLING_MODES}")
    processor_kwargs = {"trust_remote_code": True} if trust_remote_code else None
    config_kwargs = {"trust_remote_code": True} if trust_remote_code else None
    transformer = Transformer(
        local_path_or_name(model_name_or_path),
        max_seq_length=max_seq_length,
        model_kwargs=model_kwargs_for(dtype, trust_remote_code),
        processor_kwargs=processor_kwargs,
        config_kwargs=config_kwargs,
    )
    dim = transformer.get_embedding_dimension()
    model = SentenceTransformer(modules=[transformer, Pooling(dim, pooling_mode=pooling), Normalize()])
    logger.info("query encoder %s: %d-d, %s pooling", model_name_or_path, dim, pooling)
    return model
