"""A query encoder's graph inputs built by the Rust tokenizer directly: the online path's fixed cost cut.

At batch 1 a shallow query tower spends as long in Python's tokenizer call as in its graph: on the dev set's
queries, ``transformers``' ``tokenizer(texts, padding=True, truncation=True, return_tensors="np")`` took about
55 µs (its Python layer: argument resolution, ``BatchEncoding``, tensor conversion) around the 20 µs of the Rust
``tokenizers.Tokenizer.encode_batch`` it wraps — and a 1-layer e5 int8 graph runs in about 350 µs. Every
tower pays that overhead once per query, so it caps how much cheaper a shallow tower can be than the 12-layer
one (issue 41's frontier). :class:`TokenFeeds` calls the Rust tokenizer itself, with the truncation and padding
the Python call would set, and converts to ``int64`` arrays.

It is used only where it gives the very same inputs: at construction it tokenizes :data:`PROBES` (empty, long,
emoji, Latin, traditional characters, mixed batches) both ways and falls back to the ``transformers`` call on
any difference, or for a slow (Python) tokenizer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: Texts both paths must tokenise identically before the direct path is used (single texts and one batch).
PROBES: tuple[str, ...] = (
    "头痛发热怎么办", "", "   ", "高血壓患者應該吃什麼藥？", "what is this 😀！！！123", "query: 糖尿病" * 400,
    "\u200b", "CT 肺结节 <s> </s> <pad>",
)
#: Graph input name -> attribute of a ``tokenizers.Encoding``.
ENCODING_FIELDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


class TokenFeeds:
    """``texts -> {input name: (batch, sequence) int64 array}``, as ``tokenizer(texts, padding=True,
    truncation=True, max_length=max_length, return_tensors="np")`` gives them.

    Args:
        tokenizer: a ``transformers`` tokenizer (fast ones carry the Rust tokenizer as ``backend_tokenizer``).
        max_length: truncation length in tokens (special tokens included).
        input_names: the graph's inputs, a subset of :data:`ENCODING_FIELDS`.
        allow_direct: False always uses the ``transformers`` call (the before of a side-by-side timing).
    Attributes:
        direct: True when the Rust tokenizer is called directly (it matched on :data:`PROBES`).
    """

    def __init__(self, tokenizer: Any, max_length: int, input_names: Sequence[str], *, allow_direct: bool = True) -> None:
        self._tokenizer = tokenizer
        self.max_length = int(max_length)
        self.input_names = list(input_names)
        self._rust = self._configured_backend() if allow_direct else None
        self.direct = self._rust is not None and self._agrees_on_probes()
        if self._rust is not None and not self.direct:
            logger.info("the Rust tokenizer does not reproduce %s's inputs on the probes; using the transformers call",
                        type(tokenizer).__name__)

    def __call__(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return self._direct(texts) if self.direct else self._reference(texts)

    def _reference(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        batch = self._tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                                return_tensors="np")
        return {name: np.asarray(batch[name], dtype=np.int64) for name in self.input_names}

    def _direct(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        encodings = self._rust.encode_batch(list(texts))
        return {name: np.array([getattr(e, ENCODING_FIELDS[name]) for e in encodings], dtype=np.int64)
                for name in self.input_names}

    def _configured_backend(self) -> Any | None:
        """A copy of the fast tokenizer's Rust tokenizer with the call's truncation and padding, or None."""
        backend = getattr(self._tokenizer, "backend_tokenizer", None)
        if backend is None or any(name not in ENCODING_FIELDS for name in self.input_names):
            return None
        from tokenizers import Tokenizer

        rust = Tokenizer.from_str(backend.to_str())
        rust.enable_truncation(self.max_length, strategy="longest_first",
                               direction=getattr(self._tokenizer, "truncation_side", "right"))
        pad_id = self._tokenizer.pad_token_id
        if pad_id is None:
            return None
        rust.enable_padding(direction=getattr(self._tokenizer, "padding_side", "right"), pad_id=pad_id,
                            pad_type_id=getattr(self._tokenizer, "pad_token_type_id", 0),
                            pad_token=self._tokenizer.pad_token)
        return rust

    def _agrees_on_probes(self) -> bool:
        cases = [[text] for text in PROBES] + [list(PROBES)]
        for texts in cases:
            want, got = self._reference(texts), self._direct(texts)
            if any(want[name].shape != got[name].shape or not np.array_equal(want[name], got[name])
                   for name in self.input_names):
                return False
        return True
