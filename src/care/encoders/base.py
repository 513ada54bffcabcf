"""The boundary every model crosses: dense :class:`Encoder` and lexical :class:`LexicalRetriever`.

A dense encoder maps texts to L2-normalised float32 vectors in two roles. Queries may carry a
task instruction (the paper's format, ``Instruct: {instruction}\\nQuery: {query}``, or whatever the
model's own convention is — the encoder decides how to apply it); documents are encoded without
one. Scores are inner products, i.e. cosine similarity.

Symmetric models implement both roles with the same network; CARE's asymmetric model uses a small
query encoder and a large document encoder whose outputs share one space (``dim``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Encoder(Protocol):
    """A dense text encoder with query and document roles.

    Attributes:
        name: short human-readable name used in result files and tables.
        fingerprint: stable identifier of the weights *and* the encoding settings (pooling,
            instruction format, max length, dims). Two encoders with the same fingerprint must
            produce the same vectors; the embedding cache keys on it.
        dim: output dimension of both roles.
    """

    name: str

    @property
    def fingerprint(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode_queries(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of L2-normalised query embeddings."""
        ...

    def encode_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of L2-normalised document embeddings."""
        ...


@runtime_checkable
class LexicalRetriever(Protocol):
    """A sparse / lexical model (e.g. BM25) that scores texts directly instead of embedding them."""

    name: str

    @property
    def fingerprint(self) -> str: ...

    def index(self, doc_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Build the index over a corpus."""
        ...

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Return, per query, up to ``k`` ``(doc_id, score)`` pairs, best first."""
        ...

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Score one query against an ad-hoc list of texts (used by rerank tasks)."""
        ...


def role_fingerprint(model: Encoder, role: str) -> str:
    """Identify the vectors of one role, for caches.

    An encoder whose roles come from separate towers (an asymmetric pair) may define
    ``role_fingerprint(role)`` so that, e.g., document embeddings cached for ``e5`` are reused by
    ``asym:student|e5``; everything else falls back to the whole-model ``fingerprint``.
    """
    own = getattr(model, "role_fingerprint", None)
    return own(role) if callable(own) else model.fingerprint


@dataclass(frozen=True)
class LongQueries:
    """How many queries are longer than a model reads in one pass.

    Attributes:
        count: queries over the limit (their token count includes prefix, instruction and special tokens).
        limit: tokens the model reads in one pass.
        handling: what the model does with the rest, e.g. ``truncated`` (the tail is not read).
    """

    count: int
    limit: int
    handling: str


def long_queries(model: Encoder, texts: Sequence[str], instruction: str | None) -> LongQueries | None:
    """Count the ``texts`` that ``model``'s query role cannot read whole, when it can say so.

    An encoder that knows its tokenizer defines ``long_queries(texts, *, instruction)`` (the HF and e5
    encoders do; an asymmetric pair asks its query tower); for any other (a remote API, a test fake)
    this is None: not measured.
    """
    own = getattr(model, "long_queries", None)
    return own(texts, instruction=instruction) if callable(own) else None


def format_instruction(instruction: str | None, query: str, template: str = "Instruct: {instruction}\nQuery: {query}") -> str:
    """Apply a task instruction to a query in the paper's (Qwen3-Embedding / E5-instruct) format.

    ``format_instruction("Retrieve ...", "头痛怎么办")`` -> ``"Instruct: Retrieve ...\\nQuery: 头痛怎么办"``.
    With no instruction the query is returned unchanged.
    """
    if not instruction:
        return query
    return template.format(instruction=instruction, query=query)
