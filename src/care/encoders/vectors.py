"""Small numeric helpers shared by the encoders: row-wise L2 normalisation and Matryoshka truncation."""

from __future__ import annotations

import numpy as np

#: Rows with a norm below this are left as zeros instead of being divided by ~0.
MIN_NORM = 1e-12


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Return ``vectors`` (``(n, d)``) as contiguous float32 with every row scaled to unit L2 norm.

    A zero row stays zero (its cosine with anything is then 0, never NaN).
    """
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"expected a 2-d array of embeddings, got shape {array.shape}")
    norms = np.sqrt(np.einsum("ij,ij->i", array, array))[:, None]  # cheaper than np.linalg.norm on a query's row
    return np.ascontiguousarray(array / np.maximum(norms, MIN_NORM), dtype=np.float32)


def truncate_and_normalize(vectors: np.ndarray, dim: int | None) -> np.ndarray:
    """Keep the first ``dim`` coordinates (Matryoshka truncation) and re-normalise each row.

    ``dim=None`` keeps every coordinate. The paper cuts the document encoder's MRL-trained output to
    the query encoder's width this way; a plain model truncated like this loses quality.
    """
    array = np.asarray(vectors, dtype=np.float32)
    if dim is not None:
        if dim > array.shape[1]:
            raise ValueError(f"cannot truncate {array.shape[1]}-d embeddings to {dim} dimensions")
        array = array[:, :dim]
    return l2_normalize(array)


def empty_embeddings(dim: int) -> np.ndarray:
    """A ``(0, dim)`` float32 array: what every encoder returns for an empty list of texts."""
    return np.zeros((0, dim), dtype=np.float32)
