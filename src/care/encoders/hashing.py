"""A model-free encoder: hashed character n-gram counts (scikit-learn's ``HashingVectorizer``).

Deterministic and instant; used where no neural encoder is available or wanted (curation and an
offline judge in ``care demo --skip-e5``, throughput runs of the curation benchmark).

Any text encodes: characters are counted as they are (lower-cased; punctuation, emoji, digits,
Latin and traditional characters all count, no NFKC, so full-width ``Ａ`` and ``A`` differ). A text
with nothing visible (only whitespace, zero-width or control characters; :mod:`care.data.text_rules`)
encodes to the zero vector, whose inner product with every vector is 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from care.data.text_rules import is_visible
from care.hashes import hex_digest

#: Width of the hashed feature space.
HASHING_DIM = 512
#: Character n-gram range counted.
HASHING_NGRAMS = (1, 2)
#: Version of the text preparation, part of the fingerprint (2: invisible-only texts encode to zeros).
PREPARATION_VERSION = 2


def prepare(text: str) -> str:
    """The text the n-grams are counted on: ``text`` lower-cased, or ``""`` when nothing in it is visible."""
    return text.lower() if any(is_visible(char) for char in text) else ""


class HashingCharEncoder:
    """Hashed character 1-2-gram counts, L2-normalised; both roles alike; instructions ignored.

    Deterministic and model-free: for curation and an offline judge when no neural encoder is
    available. It sees only surface overlap, so synonyms (心梗 / 心肌梗死) do not match.
    """

    name = f"hashing-char12-{HASHING_DIM}d"
    dim = HASHING_DIM

    def __init__(self) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self._vectorizer = HashingVectorizer(analyzer="char", ngram_range=HASHING_NGRAMS, n_features=HASHING_DIM,
                                             alternate_sign=False, norm="l2", preprocessor=prepare)

    @property
    def fingerprint(self) -> str:
        return hex_digest(f"{self.name}:{HASHING_NGRAMS}:v{PREPARATION_VERSION}", length=16)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._vectorizer.transform(list(texts)).toarray(), dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], *, instruction: str | None = None, batch_size: int = 32,
                       show_progress: bool = False) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._encode(texts)
