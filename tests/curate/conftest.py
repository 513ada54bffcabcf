"""Shared fixtures for the curate tests: a tiny deterministic encoder and a local chat server."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest

from care.testing.chat_server import FakeChatServer

DIM = 64


class CharEncoder:
    """A deterministic bag-of-characters encoder (texts sharing characters are similar)."""

    name = "char-test"
    dim = DIM

    @property
    def fingerprint(self) -> str:
        return "char-test-v1"

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text:
                out[i, int(hashlib.md5(ch.encode()).hexdigest(), 16) % DIM] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        return self._encode(texts)

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        return self._encode(texts)


@pytest.fixture
def char_encoder() -> CharEncoder:
    return CharEncoder()


@pytest.fixture
def chat_server():
    with FakeChatServer(timeout_sleep_s=0.6, retry_after_s=0.05) as server:
        yield server
