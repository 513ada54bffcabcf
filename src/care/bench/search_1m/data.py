"""The vectors of the million-vector search benchmark (``care.bench.search_1m``): real vectors and clustered synthetic
ones around them.

* **real** — passage vectors of a dev corpus and, as the queries, vectors of its test questions (given by the caller:
  ``benchmarks/search_1m_data.py`` encodes them with multilingual-e5-small);
* **clustered synthetic** for the rest: each synthetic vector is a real passage vector plus Gaussian noise
  drawn with the real vectors' own covariance (so it has e5's anisotropy), scaled so that a synthetic
  vector's cosine to its real parent equals the median cosine of a real passage to its nearest real
  neighbour (:func:`synthetic_spec`);
* **wider** sets — the same vectors mapped by a fixed random orthonormal 384 -> ``dim`` embedding plus
  isotropic noise of norm :data:`NOISE_1024`.

:func:`build_data` writes ``vectors.npy`` (real rows first), ``queries.npy`` and ``data.json`` (written last:
a folder with it is complete).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

N_VECTORS = 1_000_000
#: Real test queries kept (search_1m measures recall over all of them).
N_QUERIES = 1000
#: Norm of the isotropic noise added after the 384 -> 1024 embedding.
NOISE_1024 = 0.2
#: Rows generated per block (bounded memory).
BLOCK = 100_000
SEED = 0


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def synthetic_spec(real: np.ndarray) -> dict[str, Any]:
    """Noise covariance factor and scale that give synthetic children the real nearest-neighbour cosine."""
    sims = real @ real.T
    np.fill_diagonal(sims, -1.0)
    nn_cos = float(np.median(sims.max(axis=1)))
    centred = real - real.mean(axis=0)
    eigval, eigvec = np.linalg.eigh(centred.T @ centred / len(real))
    eigval = np.clip(eigval, 0.0, None)
    trace = float(eigval.sum())
    scale = float(np.sqrt((1.0 / nn_cos**2 - 1.0) / trace))  # |r| = 1, noise ⟂ r on average: cos = 1/sqrt(1 + s²·tr)
    return {"nn_cos_median": nn_cos, "scale": scale, "factor": (eigvec * np.sqrt(eigval)).T, "trace": trace}


def build_data(work: Path, dim: int, n_vectors: int, real_vectors: Callable[[], tuple[np.ndarray, np.ndarray]]) -> Path:
    """The ``n_vectors x dim`` float32 memmap (real rows first) and the query matrix under ``work``; returns the data
    folder (kept when complete). ``real_vectors()`` gives the real passage and query vectors (called only to build)."""
    folder = work / (f"d{dim}" if n_vectors == N_VECTORS else f"d{dim}_n{n_vectors}")
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "data.json"
    if done.is_file():
        return folder
    docs, queries = real_vectors()
    spec = synthetic_spec(docs)
    rng = np.random.default_rng(SEED)
    n_real, base = len(docs), docs.shape[1]
    embed = None
    if dim != base:
        embed, _ = np.linalg.qr(rng.standard_normal((dim, base)))  # orthonormal columns: dim x base
        embed = embed.astype(np.float32)

    def widen(x: np.ndarray) -> np.ndarray:
        if embed is None:
            return x
        noise = rng.standard_normal((len(x), dim)).astype(np.float32) * (NOISE_1024 / np.sqrt(dim))
        return _unit(x @ embed.T + noise).astype(np.float32)

    out = np.lib.format.open_memmap(folder / "vectors.partial.npy", mode="w+", dtype=np.float32, shape=(n_vectors, dim))
    out[:n_real] = widen(docs)
    for start in range(n_real, n_vectors, BLOCK):
        n = min(BLOCK, n_vectors - start)
        parents = docs[rng.integers(0, n_real, n)]
        children = parents + spec["scale"] * (rng.standard_normal((n, base)).astype(np.float32) @ spec["factor"])
        out[start : start + n] = widen(_unit(children).astype(np.float32))
    out.flush()
    del out
    os.replace(folder / "vectors.partial.npy", folder / "vectors.npy")
    np.save(folder / "queries.npy", widen(queries[:N_QUERIES]))
    sample = np.load(folder / "vectors.npy", mmap_mode="r")[n_real : n_real + 2000]
    info = {"n": n_vectors, "dim": dim, "real_rows": n_real, "queries": min(N_QUERIES, len(queries)),
            "real_nn_cosine_median": spec["nn_cos_median"], "noise_scale": spec["scale"],
            "synthetic_to_parent_cosine_median": None if embed is not None else float(np.median(
                np.max(np.asarray(sample) @ docs.T, axis=1))),
            "noise_1024": NOISE_1024 if embed is not None else None, "seed": SEED}
    done.write_text(json.dumps(info, indent=2), encoding="utf-8")
    logger.info("data d%d: %s", dim, info)
    return folder
