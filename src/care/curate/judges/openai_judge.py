"""An LLM judge behind any OpenAI-compatible chat API (OpenAI, vLLM, DashScope, DeepSeek, ...).

One :meth:`OpenAIChatJudge.judge` call sends several passages in one prompt and asks for a JSON
grade per passage. Transient failures (timeouts, connection errors, 408/409/429, 5xx) are retried
with exponential backoff, honouring the server's ``Retry-After`` / ``retry-after-ms`` header;
passages missing from a reply (or an unparseable reply) are re-asked, alone, up to ``max_reasks``
times. Tokens and cost are counted from the replies' ``usage``.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import time
from collections.abc import Sequence

from care.curate.judges.base import JudgeError, Usage, UsageMeter
from care.curate.judges.config import JudgeConfig
from care.curate.judges.parse import parse_grades
from care.curate.judges.prompt import JudgePrompt
from care.errors import CareError
from care.hashes import hex_digest

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429})
NO_KEY = "not-needed"
JITTER = 0.1
TOKENS_PER_MILLION = 1_000_000


def _retry_after_s(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` seconds or HTTP date)."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _connection_hint(exc: Exception, base_url: str | None) -> str:
    """What to check when the server could not be reached at all (not for timeouts or HTTP errors)."""
    import openai

    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        return (f" — nothing answered at {base_url}: check base_url in the judges config and that the server "
                "is running and reachable from this machine")
    return ""


class ChatClient:
    """One OpenAI-compatible chat endpoint with retries, backoff and token / cost accounting.

    ``complete(messages)`` returns the reply text. Retries timeouts, connection errors,
    408/409/429 and 5xx with exponential backoff (``backoff_base_s * 2**attempt``, capped at
    ``backoff_max_s``, plus jitter), or the server's ``Retry-After`` when it sends one; other 4xx
    errors (bad key, bad request) fail at once. Thread-safe.
    """

    def __init__(self, config: JudgeConfig, *, client: object | None = None, sleep=time.sleep) -> None:
        import openai

        self.config = config
        self.meter = UsageMeter()
        self._sleep = sleep
        self._openai = openai
        if client is None:
            key = NO_KEY
            if config.api_key_env:
                key = os.environ.get(config.api_key_env, "")
                if not key:
                    raise CareError(f"judge {config.id!r}: environment variable {config.api_key_env} is empty; "
                                    "export the API key there")
            client = openai.OpenAI(base_url=config.base_url, api_key=key, max_retries=0, timeout=config.timeout_s)
        self._client = client

    def usage(self) -> Usage:
        return self.meter.snapshot()

    def complete(self, messages: list[dict[str, str]]) -> str:
        openai = self._openai
        cfg = self.config
        for attempt in range(cfg.max_retries + 1):
            self.meter.add(sent=1)  # on disk before the request leaves: a kill now still shows it
            try:
                response = self._client.chat.completions.create(
                    model=cfg.model, messages=messages, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                )
            except (openai.APITimeoutError, openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                retryable = status is None or status in RETRYABLE_STATUS or status >= 500
                if not retryable or attempt == cfg.max_retries:
                    self.meter.add(errors=1)
                    raise JudgeError(f"judge {cfg.id!r}: {type(exc).__name__} ({status or 'no status'}) from "
                                     f"{cfg.base_url} after {attempt + 1} attempt(s): {exc}"
                                     f"{_connection_hint(exc, cfg.base_url)}") from exc
                wait = _retry_after_s(exc)
                if wait is None:
                    wait = min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** attempt) * (1 + JITTER * random.random())
                wait = min(wait, cfg.retry_after_max_s)
                logger.info("judge %s: %s, retry %d in %.2fs", cfg.id, status or type(exc).__name__, attempt + 1, wait)
                self.meter.add(retries=1)
                self._sleep(wait)
                continue
            usage = getattr(response, "usage", None)
            p_tok = getattr(usage, "prompt_tokens", 0) or 0
            c_tok = getattr(usage, "completion_tokens", 0) or 0
            cost = (p_tok * cfg.price_input_per_million + c_tok * cfg.price_output_per_million) / TOKENS_PER_MILLION
            self.meter.add(calls=1, prompt_tokens=p_tok, completion_tokens=c_tok, cost_usd=cost)
            content = response.choices[0].message.content if response.choices else None
            return content or ""
        raise AssertionError("unreachable")


class OpenAIChatJudge:
    """A :class:`~care.curate.judges.base.Judge` that asks a chat model for S/A/B/C/D grades."""

    def __init__(self, config: JudgeConfig, *, client: object | None = None, sleep=time.sleep) -> None:
        self.config = config
        self.id = config.id
        self.passages_per_call = config.passages_per_call
        self.max_concurrency = config.max_concurrency
        self.prompt = JudgePrompt.load(config.prompt)
        self.chat = ChatClient(config, client=client, sleep=sleep)

    @property
    def fingerprint(self) -> str:
        """Prompt template hash plus the model and sampling settings the grades depend on."""
        settings = f"{self.prompt.hash}|{self.config.model}|{self.config.temperature}"
        return hex_digest(settings, length=16)

    @property
    def meter(self) -> UsageMeter:
        """Every request's usage as it happens (see :func:`care.curate.judges.base.usage_meter`)."""
        return self.chat.meter

    def usage(self) -> Usage:
        return self.chat.usage()

    def judge(self, query: str, passages: Sequence[str]) -> list[str]:
        """Grades for ``passages``; re-asks only for passages a reply left out.

        Raises:
            JudgeError: some passages are still ungraded after ``max_reasks`` re-asks (or a request
                failed for good); its ``grades`` carries the grades that did come back.
        """
        grades: list[str | None] = [None] * len(passages)
        pending = list(range(len(passages)))
        for attempt in range(self.config.max_reasks + 1):
            if attempt:
                self.chat.meter.add(reasks=1)
                logger.debug("judge %s: re-asking %d passage(s)", self.id, len(pending))
            try:
                reply = self.chat.complete(self.prompt.messages(query, [passages[i] for i in pending]))
            except JudgeError as exc:
                raise JudgeError(str(exc), grades=grades) from exc
            parsed = parse_grades(reply, len(pending))
            for local, grade in parsed.items():
                grades[pending[local]] = grade
            pending = [p for i, p in enumerate(pending) if i not in parsed]
            if not pending:
                return [g for g in grades if g is not None]
        raise JudgeError(f"judge {self.id!r}: no valid grade for {len(pending)} of {len(passages)} passage(s) after "
                         f"{self.config.max_reasks + 1} replies (last reply: {reply[:200]!r})", grades=grades)
