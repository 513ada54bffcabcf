"""Deterministic fake models for the harness tests (no weights, no network)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from care.encoders.base import format_instruction


def _bucket(gram: str, dim: int) -> int:
    return int.from_bytes(hashlib.md5(gram.encode("utf-8")).digest()[:4], "little") % dim


class HashEncoder:
    """Hashed character unigrams + bigrams, L2-normalised; counts the texts it encodes per role."""

    def __init__(self, dim: int = 64, name: str = "hash", query_dim: int | None = None) -> None:
        self.name = name
        self._dim = dim
        self._query_dim = query_dim or dim
        self.calls = {"query": 0, "document": 0}
        self.seen_instructions: list[str | None] = []

    @property
    def fingerprint(self) -> str:
        return f"hash-{self.name}-{self._dim}-{self._query_dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _embed(self, texts: Sequence[str], dim: int) -> np.ndarray:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            grams = list(text) + [text[j : j + 2] for j in range(len(text) - 1)]
            for g in grams:
                out[i, _bucket(g, dim)] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        self.calls["query"] += len(texts)
        self.seen_instructions.append(instruction)
        # the instruction is applied but only the query text is embedded, so scores stay readable
        formatted = [format_instruction(instruction, t).split("Query: ")[-1] for t in texts]
        return self._embed(formatted, self._query_dim)

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        self.calls["document"] += len(texts)
        return self._embed(list(texts), self._dim)


class TableEncoder:
    """Returns fixed vectors looked up by text (for hand-computed metric cases)."""

    name = "table"

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self._dim = len(next(iter(self.table.values())))

    @property
    def fingerprint(self) -> str:
        return "table-" + hashlib.sha256(json.dumps({k: v.tolist() for k, v in sorted(self.table.items())}).encode()).hexdigest()[:12]

    @property
    def dim(self) -> int:
        return self._dim

    def _look(self, texts):
        return np.stack([self.table[t] for t in texts])

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        return self._look(texts)

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        return self._look(texts)


class OverlapRetriever:
    """A lexical retriever: score = number of shared characters."""

    name = "overlap"
    fingerprint = "overlap-v1"

    def index(self, doc_ids, texts):
        self.ids, self.texts = list(doc_ids), list(texts)

    def score(self, query, texts):
        q = set(query)
        return np.array([len(q & set(t)) for t in texts], dtype=np.float32)

    def search(self, queries, k):
        out = []
        for q in queries:
            s = self.score(q, self.texts)
            order = np.argsort(-s, kind="stable")[:k]
            out.append([(self.ids[i], float(s[i])) for i in order])
        return out
