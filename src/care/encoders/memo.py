""":class:`MemoEncoder`: any encoder with a text -> vector memo per role (and instruction), saved to disk.

A text shared by several steps of a run (curation, judging, a frozen teacher, evaluation on several
tasks) is encoded once; the memo has the wrapped encoder's ``name``, ``fingerprint`` and vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from care.data.io import atomic_write
from care.encoders.base import Encoder


class MemoEncoder:
    """``encoder`` with every encoded text remembered (per role and instruction), optionally on disk.

    Args:
        encoder: the wrapped :class:`~care.encoders.base.Encoder`.
        path: ``.npz`` file the memo is loaded from (when present) and saved to by :meth:`save`.
    """

    def __init__(self, encoder: Encoder, path: str | Path | None = None) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.path = Path(path) if path is not None else None
        self.table: dict[tuple[str, str], np.ndarray] = {}
        self.encoded = 0
        if self.path is not None and self.path.is_file():
            with np.load(self.path, allow_pickle=False) as data:
                if str(data["fingerprint"]) == encoder.fingerprint:
                    self.table = {(str(k), str(t)): v for k, t, v in zip(data["keys"], data["texts"], data["vectors"])}

    @property
    def fingerprint(self) -> str:
        return self.encoder.fingerprint

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def _lookup(self, key: str, texts: Sequence[str], encode) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (key, t) not in self.table))
        if missing:
            for text, vec in zip(missing, encode(missing)):
                self.table[(key, text)] = np.asarray(vec, dtype=np.float32)
            self.encoded += len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.table[(key, t)] for t in texts]).astype(np.float32)

    def encode_queries(self, texts: Sequence[str], *, instruction: str | None = None, batch_size: int = 32,
                       show_progress: bool = False) -> np.ndarray:
        key = "query\x00" + (instruction or "")
        return self._lookup(key, list(texts), lambda m: self.encoder.encode_queries(
            m, instruction=instruction, batch_size=batch_size, show_progress=show_progress))

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._lookup("document", list(texts), lambda m: self.encoder.encode_documents(
            m, batch_size=batch_size, show_progress=show_progress))

    def save(self) -> None:
        """Write the memo to ``path`` atomically (no-op without a path)."""
        if self.path is None:
            return
        keys = [k for k, _ in self.table]
        texts = [t for _, t in self.table]
        vectors = np.stack(list(self.table.values())) if self.table else np.zeros((0, self.dim), np.float32)
        with atomic_write(self.path, "wb", encoding=None) as fh:
            np.savez(fh, fingerprint=np.array(self.encoder.fingerprint), keys=np.array(keys, dtype=str),
                     texts=np.array(texts, dtype=str), vectors=vectors)

    def __repr__(self) -> str:
        return f"MemoEncoder({self.encoder!r}, {len(self.table)} texts)"


__all__ = ["MemoEncoder"]
