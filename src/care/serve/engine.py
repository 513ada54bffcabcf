"""The search engine behind the HTTP service: query encoder + vector index + document store.

:func:`load_engine` does every start-up check (index folder complete and consistent, encoder width
equal to the index's, API key present) so that ``care serve`` fails before it listens, never at
the first query. :class:`SearchEngine` turns batches of queries into hits; the app hands it
concurrent requests through a :class:`~care.serve.batcher.MicroBatcher`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from care.encoders.base import Encoder
from care.encoders.vectors import truncate_and_normalize
from care.errors import CareError, DimensionMismatchError
from care.index.bundle import IndexBundle, open_index_folder
from care.index.docstore import DocumentReadError
from care.index.integrity import DEFAULT_VERIFY
from care.serve.config import ServeConfig

logger = logging.getLogger(__name__)

#: Batcher keys: ("embed", side, instruction, raw) and ("search", instruction).
EMBED = "embed"
SEARCH = "search"


@dataclass
class EncodedHits:
    """One query's raw search result: scores and row ids, best first."""

    scores: np.ndarray
    rows: np.ndarray


def encode_raw_queries(encoder: Encoder, texts: list[str]) -> np.ndarray:
    """Embed query texts exactly as given (no stored query prompt); falls back to the encoder's own convention."""
    from care.encoders.hf import HFEncoder
    from care.encoders.onnx import OnnxQueryEncoder

    if isinstance(encoder, OnnxQueryEncoder):
        return encoder.encode_queries(texts, prompt="")
    if isinstance(encoder, HFEncoder):
        vectors = encoder.model.encode_query(texts, prompt="", batch_size=encoder.config.batch_size, convert_to_numpy=True)
        return truncate_and_normalize(vectors, encoder.config.dim)
    return encoder.encode_queries(texts)


class SearchEngine:
    """Encodes and searches; every method here is synchronous and runs in the batcher's worker thread.

    Args:
        bundle: the opened index folder.
        query_encoder: encodes the query side (PyTorch query route or ONNX).
        document_encoder: optional document-side encoder for ``/embed`` with ``side="document"``.
        config: service limits.
        model_matches_index: False when the query model's identity differs from the manifest's.
    """

    def __init__(self, bundle: IndexBundle, query_encoder: Encoder, config: ServeConfig, *,
                 document_encoder: Encoder | None = None, model_matches_index: bool = True) -> None:
        self.bundle = bundle
        self.query_encoder = query_encoder
        self.document_encoder = document_encoder
        self.config = config
        self.model_matches_index = model_matches_index
        self.default_instruction = bundle.manifest.instruction

    @property
    def dim(self) -> int:
        return self.bundle.dim

    # -- batch processing (called by the micro-batcher) -----------------------------------------
    def process(self, key: Hashable, items: list[Any]) -> list[Any]:
        kind = key[0]  # type: ignore[index]
        if kind == EMBED:
            _, side, instruction, raw = key  # type: ignore[misc]
            return list(self.encode(side, list(items), instruction=instruction, raw=raw))
        if kind == SEARCH:
            _, instruction = key  # type: ignore[misc]
            return self.search_vectors([text for text, _ in items], [n for _, n in items], instruction=instruction)
        raise CareError(f"unknown batch key {key!r}")

    def encode(self, side: str, texts: list[str], *, instruction: str | None, raw: bool) -> np.ndarray:
        """Embed ``texts`` on one side; ``raw`` = exactly as given (no default prompt or instruction)."""
        if side == "document":
            if self.document_encoder is None:
                raise CareError("the document encoder is not loaded; start the service with --document-model to embed documents")
            return self.document_encoder.encode_documents(texts)
        if raw and not instruction:
            return encode_raw_queries(self.query_encoder, texts)
        return self.query_encoder.encode_queries(texts, instruction=instruction or self.default_instruction)

    def search_vectors(self, texts: list[str], candidates: list[int], *, instruction: str | None) -> list[EncodedHits]:
        vectors = self.query_encoder.encode_queries(texts, instruction=instruction or self.default_instruction)
        scores, rows = self.bundle.index.search(np.ascontiguousarray(vectors, dtype=np.float32), max(candidates))
        return [EncodedHits(scores[i, : candidates[i]], rows[i, : candidates[i]]) for i in range(len(texts))]

    # -- lookup ---------------------------------------------------------------------------------
    def candidates_for(self, k: int, filters: Mapping[str, Any] | None) -> int:
        """How many candidates to search for ``k`` hits (over-fetch when post-filtering)."""
        if not filters:
            return k
        return min(max(k, k * self.config.filter_overfetch), self.config.max_candidates)

    def hits(self, found: EncodedHits, k: int, filters: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """Look up documents, apply filters, keep the best ``k``.

        Raises:
            DocumentReadError: the document store failed, or lacks a row the vector index returned (a damaged
                store must not answer with fewer hits).
        """
        valid = [(float(s), int(r)) for s, r in zip(found.scores, found.rows) if r >= 0]
        docs = self.bundle.docstore.get([r for _, r in valid])
        missing = sorted({row for _, row in valid} - set(docs))
        if missing:
            raise DocumentReadError(f"document store {self.bundle.docstore.path} has no row {missing[0]} that the vector "
                                    f"index returned ({len(missing)} missing); it is damaged — rebuild the index with "
                                    "'care index build'")
        out = []
        for score, row in valid:
            doc = docs[row]
            if not doc.matches(filters):
                continue
            out.append({"id": doc.id, "score": score, "title": doc.title, "text": doc.text, "metadata": doc.metadata})
            if len(out) == k:
                break
        return out


def _check_width(encoder: Encoder, bundle: IndexBundle, what: str) -> None:
    if encoder.dim != bundle.dim:
        raise DimensionMismatchError(
            f"the {what} gives {encoder.dim}-d vectors but the index at {bundle.folder} holds {bundle.dim}-d vectors "
            f"(built with {bundle.manifest.model}); serve the model the index was built with"
        )


def load_engine(
    index_dir: str | Path,
    model: str | None = None,
    *,
    config: ServeConfig | None = None,
    onnx_dir: str | Path | None = None,
    int8: bool = False,
    document_model: str | None = None,
    device: str | None = None,
    onnx_threads: int = 0,
    verify: str = DEFAULT_VERIFY,
) -> SearchEngine:
    """Open the index and load only the query encoder (and, if asked, a document encoder).

    Args:
        index_dir: folder from ``care index build``.
        model: model spec (default: the one in the manifest); for a CARE folder only the query route loads.
        onnx_dir: use this ONNX export for queries instead of PyTorch (``int8``: the quantised model).
        document_model: also load the document side of this spec (for ``/embed`` side=document).
        verify: how the index folder's files are checked before anything is served: ``full`` (sizes + SHA-256
            against the manifest, SQLite quick_check, stored vector norms), ``quick`` (the same without SHA-256),
            ``off`` (:func:`~care.index.bundle.open_index_folder`).
    Raises:
        CareError: anything that would make the first query fail.
    """
    from care.encoders.sides import load_side, model_identity

    started = time.perf_counter()
    config = config or ServeConfig()
    bundle = open_index_folder(index_dir, verify=verify)
    spec = model or bundle.manifest.model
    if onnx_dir is not None:
        from care.encoders.onnx import OnnxQueryEncoder

        query_encoder: Encoder = OnnxQueryEncoder(onnx_dir, int8=int8, threads=onnx_threads)
        identity_source = query_encoder.config.source  # type: ignore[attr-defined]
    else:
        query_encoder = load_side(spec, "query", device=device)
        identity_source = spec
    _check_width(query_encoder, bundle, "query encoder")
    matches = model_identity(identity_source) == bundle.manifest.model_identity
    if not matches:
        logger.warning("the query model %s is not the model the index was built with (%s): results may be poor",
                       identity_source, bundle.manifest.model)
    document_encoder = None
    if document_model is not None:
        document_encoder = load_side(document_model, "document", device=device)
        _check_width(document_encoder, bundle, "document encoder")
    engine = SearchEngine(bundle, query_encoder, config, document_encoder=document_encoder, model_matches_index=matches)
    engine.query_encoder.encode_queries(["warm-up"], instruction=engine.default_instruction)  # first call allocates
    logger.info("engine ready in %.1fs: %s over %d documents", time.perf_counter() - started, query_encoder.name, bundle.manifest.n_docs)
    return engine


def usage_tokens(texts: Sequence[str]) -> int:
    """A token count for OpenAI's ``usage`` field: characters (Chinese text is ~1 token per character)."""
    return sum(len(t) for t in texts)
