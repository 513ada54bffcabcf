"""Two encoders composed into one: queries through a small model, documents through a large one.

This is the deployment shape of the paper's CARE (a BERT-style query encoder online, an LLM
document encoder offline) when the two towers are separate folders, each with its own tokenizer
and instruction format. (A single sentence-transformers folder with a ``Router`` is loaded by
:class:`care.encoders.hf.HFEncoder` instead.) Both towers must map into one space: equal widths,
or a document side trained with Matryoshka representation learning that is cut to ``dim``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from care.encoders.base import Encoder, LongQueries, long_queries, role_fingerprint
from care.encoders.fingerprint import digest
from care.encoders.vectors import truncate_and_normalize
from care.errors import DimensionMismatchError


class AsymmetricEncoder:
    """Queries via ``query_encoder``, documents via ``document_encoder``.

    Args:
        query_encoder: any :class:`~care.encoders.base.Encoder`; its query role is used.
        document_encoder: any encoder; its document role is used.
        dim: declared shared width. ``None`` requires both widths to be equal. Otherwise the query
            side must output exactly ``dim`` and the document side at least ``dim``; document vectors
            are truncated to their first ``dim`` coordinates (Matryoshka) and re-normalised.
        name: display name (default ``"<query name>|<document name>"``).
    Raises:
        DimensionMismatchError: the widths cannot be reconciled (the message names both).
    """

    def __init__(self, query_encoder: Encoder, document_encoder: Encoder, *, dim: int | None = None, name: str | None = None) -> None:
        query_dim, document_dim = query_encoder.dim, document_encoder.dim
        if dim is None and query_dim != document_dim:
            raise DimensionMismatchError(
                f"query encoder '{query_encoder.name}' outputs {query_dim}-d vectors but document encoder "
                f"'{document_encoder.name}' outputs {document_dim}-d; they cannot share an index. If the document "
                f"encoder was trained with Matryoshka dims, declare dim={query_dim} to truncate its output."
            )
        if dim is not None and (query_dim != dim or document_dim < dim):
            raise DimensionMismatchError(
                f"declared dim={dim} does not fit: query encoder '{query_encoder.name}' outputs {query_dim}-d "
                f"(must equal dim) and document encoder '{document_encoder.name}' outputs {document_dim}-d "
                "(must be at least dim)"
            )
        self.query_encoder = query_encoder
        self.document_encoder = document_encoder
        self.name = name or f"{query_encoder.name}|{document_encoder.name}"
        self._dim = query_dim
        self._truncate_to = dim if dim is not None and dim != document_dim else None

    @property
    def fingerprint(self) -> str:
        """Hash of both towers' fingerprints and the truncation width."""
        return digest(
            {
                "kind": "asymmetric",
                "query": self.query_encoder.fingerprint,
                "document": self.document_encoder.fingerprint,
                "dim": self._dim,
            }
        )

    def role_fingerprint(self, role: str) -> str:
        """The fingerprint of the tower that serves ``role`` ("query" or "document"), plus the cut width
        for documents, so each side's cached embeddings are shared with that tower used alone."""
        if role == "query":
            return role_fingerprint(self.query_encoder, role)
        document = role_fingerprint(self.document_encoder, role)
        return document if self._truncate_to is None else digest({"document": document, "dim": self._truncate_to})

    @property
    def dim(self) -> int:
        """The shared output width."""
        return self._dim

    def encode_queries(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Query embeddings from the query tower (its own instruction format applies)."""
        kwargs = {"batch_size": batch_size} if batch_size else {}
        return self.query_encoder.encode_queries(texts, instruction=instruction, show_progress=show_progress, **kwargs)

    def long_queries(self, texts: Sequence[str], *, instruction: str | None = None) -> LongQueries | None:
        """The query tower's count of queries longer than it reads (None when it cannot tell)."""
        return long_queries(self.query_encoder, texts, instruction)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        """Document embeddings from the document tower, truncated to ``dim`` and re-normalised if declared."""
        kwargs = {"batch_size": batch_size} if batch_size else {}
        vectors = self.document_encoder.encode_documents(texts, show_progress=show_progress, **kwargs)
        return truncate_and_normalize(vectors, self._truncate_to) if self._truncate_to else vectors

    def __repr__(self) -> str:
        return f"AsymmetricEncoder(query={self.query_encoder.name!r}, document={self.document_encoder.name!r}, dim={self.dim})"
