"""``POST /search`` on the hot path: the same answer as the FastAPI route, without FastAPI's per-request work.

FastAPI's routing, dependency solving, body re-reading and exception middleware are a large part of
the service's own time per ``/search`` (``care serve bench``, settings with ``fast_search`` on and off side
by side). :class:`SearchFastPath` is a plain ASGI layer placed inside the API-key / body-size guard and the
request metrics: it answers ``POST /search`` itself — the body parsed once with orjson (by the guard, which
hands the parsed object on in the scope), a body of the common shape (a text query, an integer ``k``, an
optional plain instruction, no filters) checked by hand (:func:`lean_request`), any other body by the same
pydantic model the FastAPI route uses (:class:`~care.serve.schemas.SearchRequest`), so every refusal is
worded as before — and processed by the same :class:`SearchHandler` the FastAPI route uses; every other
request is passed on. Errors keep the service's contract: ``{"detail": ...}`` with 422 for an invalid body
(worded like the FastAPI route's), the handler's own status for its refusals, 503 with ``Retry-After`` when
the encoder queue is full.

The FastAPI route stays declared (it is what ``/openapi.json`` and ``/docs`` describe, and it serves
``/search`` when the app is used without this layer); both paths share :class:`SearchHandler`, so
they cannot drift apart.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import HTTPException
from pydantic import ValidationError

from care.data.text_rules import has_surrogate_or_nul, text_problem
from care.index.docstore import DocumentReadError
from care.serve.batcher import QueueFullError
from care.serve.engine import SEARCH, SearchEngine
from care.serve.guard import PARSED_BODY
from care.serve.metrics import SEARCH_TIMING, server_timing_header
from care.serve.schemas import SearchRequest
from care.serve.validation import MAX_INSTRUCTION_CHARS

logger = logging.getLogger(__name__)

#: ``run(key, items)``: the app's hand-off to the micro-batcher (errors already mapped to HTTPException).
RunFn = Callable[[tuple, list[Any]], Awaitable[list[Any]]]
JSON_HEADERS = [(b"content-type", b"application/json")]
#: Seconds a client should wait before retrying when the encoder queue is full (the ``Retry-After`` header).
RETRY_AFTER_S = 1
#: What an empty or non-object body is told.
NOT_AN_OBJECT = 'send a JSON object such as {"query": "头痛怎么办", "k": 10}'
#: The fields of a /search body (the model refuses any other).
SEARCH_FIELDS = frozenset({"query", "k", "filters", "instruction"})


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A checked ``/search`` request as the handler reads it (what :class:`SearchRequest` holds, without pydantic)."""

    query: str
    k: int | None = None
    filters: dict[str, Any] | None = None
    instruction: str | None = None


def lean_request(payload: dict[str, Any]) -> SearchQuery | None:
    """``payload`` as a request when it has the common shape and breaks none of the model's rules: a ``query``
    string with visible text and no lone surrogate or NUL, ``k`` absent / null or an integer >= 1, ``filters``
    absent or null, ``instruction`` absent, null or a string within its bound without surrogate or NUL, no other
    field. Anything else -> None: :class:`SearchRequest` then decides, and words any refusal (the model coerces
    ``"3"`` to 3 and checks filters; this path takes only what it would take unchanged, so both give one answer)."""
    if not SEARCH_FIELDS.issuperset(payload):
        return None
    query, k, instruction = payload.get("query"), payload.get("k"), payload.get("instruction")
    if type(query) is not str or text_problem(query) is not None or payload.get("filters") is not None:
        return None
    if k is not None and (type(k) is not int or k < 1):
        return None
    if instruction is not None and (type(instruction) is not str or len(instruction) > MAX_INSTRUCTION_CHARS
                                    or has_surrogate_or_nul(instruction)):
        return None
    return SearchQuery(query, k, None, instruction)


def validation_detail(errors: Iterable[Mapping[str, Any]]) -> str:
    """pydantic / FastAPI validation errors as one sentence: ``invalid request: k: Input should be ...``
    (``body`` names the whole body; FastAPI's leading ``body`` location is dropped)."""
    problems = []
    for error in errors:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(problems)


def search_body(hits: list[dict[str, Any]], k: int, took_ms: float) -> bytes:
    """The JSON bytes ``/search`` answers: written once with orjson rather than validated again against
    ``response_model`` (which stays the documented schema): the hits are built by the engine in that shape."""
    return orjson.dumps({"hits": hits, "k": k, "took_ms": took_ms}, option=orjson.OPT_SERIALIZE_NUMPY)


class SearchHandler:
    """What ``/search`` does with a checked request: the server-side limits, the micro-batcher, the lookup.

    Args:
        engine: the loaded search engine (its ``config`` holds the limits).
        run: the app's hand-off to the micro-batcher.
        check_texts: the app's text check (``_texts``), raising HTTPException 422.
    """

    def __init__(self, engine: SearchEngine, run: RunFn, check_texts: Callable[[Any, str, SearchEngine], Any]) -> None:
        self.engine, self.run, self.check_texts = engine, run, check_texts

    async def answer(self, request: SearchRequest | SearchQuery) -> tuple[bytes, float]:
        """The response body for ``request`` and the milliseconds it took (also the body's ``took_ms``).
        Raises HTTPException (4xx/5xx) or QueueFullError (503)."""
        started = time.perf_counter()
        engine, config = self.engine, self.engine.config
        self.check_texts(request.query, "query", engine)
        k = request.k if request.k is not None else config.default_k
        if k > config.max_k:
            raise HTTPException(422, f"k={k} is larger than the maximum {config.max_k}")
        n_candidates = engine.candidates_for(k, request.filters)
        (found,) = await self.run((SEARCH, request.instruction), [(request.query, n_candidates)])
        try:
            hits = engine.hits(found, k, request.filters)
        except DocumentReadError as exc:  # the server's fault, never a shorter answer: 500, counted by the metrics
            logger.exception("/search: the document store failed")
            raise HTTPException(500, f"the document store failed on this request: {exc}") from None
        took_ms = round((time.perf_counter() - started) * 1000, 3)
        return search_body(hits, k, took_ms), took_ms


async def _send_json(send: Callable, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _detail(message: str) -> bytes:
    return orjson.dumps({"detail": message})


class SearchFastPath:
    """ASGI middleware answering ``POST <path>`` with :class:`SearchHandler` (module docstring).

    Args:
        app: the wrapped application (everything else goes there unchanged).
        handler: the shared ``/search`` logic.
        path: the path to answer (``/search``).
        server_timing: add ``Server-Timing: search;dur=<ms>`` (the handler's time) to a 200 answer.
        lean: take a body of the common shape without the pydantic model (:func:`lean_request`) and the body the
            guard already parsed; False = every body through the model (``ServeConfig.lean_search``).
    """

    def __init__(self, app: Callable, *, handler: SearchHandler, path: str = "/search", server_timing: bool = False,
                 lean: bool = True) -> None:
        self.app, self.handler, self.path, self.server_timing, self.lean = app, handler, path, server_timing, lean

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        payload = scope.get(PARSED_BODY) if self.lean else None  # the guard parsed the body (None: it did not)
        if payload is None:
            body = b""
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client left; nobody to answer
                body += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        try:
            request = self._check(payload) if payload is not None else self._parse(body)
            answer, took_ms = await self.handler.answer(request)
        except ValidationError as exc:
            await _send_json(send, 422, _detail(validation_detail(exc.errors())))
        except HTTPException as exc:
            await _send_json(send, exc.status_code, _detail(str(exc.detail)))
        except QueueFullError as exc:
            await _send_json(send, 503, _detail(str(exc)), [(b"retry-after", str(RETRY_AFTER_S).encode())])
        else:
            await _send_json(send, 200, answer, [server_timing_header(SEARCH_TIMING, took_ms)] if self.server_timing else None)

    def _check(self, payload: Any) -> SearchRequest | SearchQuery:
        """The checked request of a parsed body: by hand when it has the common shape, else by the model."""
        if not isinstance(payload, dict):
            raise HTTPException(422, validation_detail([{"loc": (), "msg": NOT_AN_OBJECT}]))
        if self.lean:
            request = lean_request(payload)
            if request is not None:
                return request
        return SearchRequest.model_validate(payload)

    def _parse(self, body: bytes) -> SearchRequest | SearchQuery:
        """The checked request. Raises ValidationError, or HTTPException 422 for a body that is empty, not a
        JSON object, or not JSON (the guard in front normally catches the last)."""
        try:
            payload = orjson.loads(body) if body.strip() else None
        except orjson.JSONDecodeError:
            try:  # orjson refuses escaped lone surrogates; the stdlib reads them and the model names them
                payload = json.loads(body)
            except ValueError as exc:
                raise HTTPException(422, f"the request body is not valid JSON: {exc}") from None
        return self._check(payload)
