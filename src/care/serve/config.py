"""Settings of ``care serve`` as a dataclass that round-trips to JSON (no magic numbers in the app)."""

from __future__ import annotations

from dataclasses import dataclass

from care.config import Config
from care.errors import CareError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class ServeConfig(Config):
    """Limits and tuning of the search service.

    Attributes:
        max_query_chars: longest accepted query / input text (characters); longer -> 422.
        max_inputs: most texts in one ``/embed`` or ``/v1/embeddings`` request.
        max_k: largest ``k`` of ``/search``; default_k when the request gives none.
        max_batch_size: most texts the micro-batcher hands to the encoder in one call.
        max_wait_ms: how long the micro-batcher waits for more requests after the first one; 0 (default) =
            continuous batching: take what is queued now, and requests arriving while the model works
            form the next batch (no added latency when idle).
        max_queue: texts waiting for the encoder before new requests get 503 (back-pressure).
        filter_overfetch: with filters, ``k * filter_overfetch`` candidates are searched, then filtered.
        max_candidates: cap on searched candidates when filtering.
        api_key_env: environment variable holding the API key; None = no authentication.
        model_name: name reported by ``/v1/embeddings`` (``model`` field).
    """

    max_query_chars: int = 2048
    max_inputs: int = 256
    max_k: int = 100
    default_k: int = 10
    max_batch_size: int = 32
    max_wait_ms: float = 0.0
    max_queue: int = 4096
    filter_overfetch: int = 10
    max_candidates: int = 1000
    api_key_env: str | None = None
    model_name: str = "care"

    def __post_init__(self) -> None:
        for name in ("max_query_chars", "max_inputs", "max_k", "default_k", "max_batch_size", "max_queue",
                     "filter_overfetch", "max_candidates"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"serve option {name} must be >= 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise CareError(f"serve option max_wait_ms must be >= 0, got {self.max_wait_ms}")
        if self.default_k > self.max_k:
            raise CareError(f"default_k ({self.default_k}) is larger than max_k ({self.max_k})")
