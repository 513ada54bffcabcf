"""Encode text collections through the embedding cache, with a progress bar per collection."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from care.encoders.base import Encoder, role_fingerprint
from care.encoders.cache import DOCUMENT_ROLE, QUERY_ROLE, EmbeddingCache
from care.errors import DimensionMismatchError

QUERY, DOCUMENT = QUERY_ROLE, DOCUMENT_ROLE


def encode_collection(
    model: Encoder,
    cache: EmbeddingCache,
    *,
    role: str,
    ids: Sequence[str],
    texts: Sequence[str],
    instruction: str | None,
    batch_size: int,
    show_progress: bool,
    desc: str,
) -> np.ndarray:
    """Return the ``(len(texts), dim)`` embeddings of ``texts`` in ``role`` (``query`` or ``document``).

    Cached by (the role's fingerprint, role, instruction, ids+texts); encoded chunk by chunk, each checked for
    shape and finiteness. Documents are encoded without an instruction (:mod:`care.encoders.base`).
    """
    if role == QUERY:
        def encode(chunk: Sequence[str]) -> np.ndarray:
            return model.encode_queries(list(chunk), instruction=instruction, batch_size=batch_size, show_progress=False)
    else:
        instruction = None

        def encode(chunk: Sequence[str]) -> np.ndarray:
            return model.encode_documents(list(chunk), batch_size=batch_size, show_progress=False)
    key = cache.key(role_fingerprint(model, role), role, instruction, ids, texts)
    with tqdm(total=len(texts), desc=desc, unit="text", disable=not show_progress, leave=False) as bar:
        return cache.get_or_encode(key, texts, encode, name=model.name, progress=bar)


def check_same_dim(model_name: str, queries: np.ndarray, documents: np.ndarray) -> int:
    """Raise :class:`DimensionMismatchError` naming both dimensions when they differ."""
    qd, dd = int(queries.shape[1]), int(documents.shape[1])
    if qd != dd:
        raise DimensionMismatchError(
            f"{model_name}: query embeddings have dimension {qd} but document embeddings have dimension {dd}; "
            "an asymmetric model must project both into one space (e.g. Matryoshka-truncate the document side)"
        )
    return qd
