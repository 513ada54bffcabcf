"""The gate in front of the JSON endpoints: API key first, then the declared type, then body size, then
a body that is UTF-8 JSON — each refused with a JSON ``{"detail": ...}`` a person can act on, before FastAPI reads or
parses anything.

Order matters for a public service: an unauthenticated client gets 401 without a byte of its body
being read (so 100 MB bodies cost nothing), and a body over ``max_body_bytes`` gets 413 from its
``Content-Length`` alone, or as soon as a chunked body passes the limit. (FastAPI's own
``max_body_size`` answers in plain text and ahead of the key check, hence this small ASGI layer.)
A body declared as anything but JSON (``Content-Type: text/plain``, a form) gets 415 on every JSON
endpoint alike — the rule FastAPI applies to its own routes: ``application/json`` or
``application/<something>+json``; a body without ``Content-Type`` (``requests.post(url, data=...)``)
is read as JSON on every endpoint.
A body that is not UTF-8 or not complete JSON gets 422 naming the byte, line or column, instead of
FastAPI's bare "There was an error parsing the body". The checked body is handed on unchanged and, parsed once
by orjson, in the scope under :data:`PARSED_BODY` for the ``/search`` hot path (:mod:`care.serve.search_path`); a
body orjson refuses (a lone surrogate's escape, ``NaN``) is judged by the standard library as before.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable

import orjson
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Where a parsed body travels in the scope (:mod:`care.serve.search_path` reads it; one name for both).
PARSED_BODY = "care.parsed_body"

BEARER = "bearer "
#: Bytes of context shown around a bad byte in a UTF-8 error.
CONTEXT_BYTES = 8
JSON_TYPE = "application/json"
#: Structured-syntax suffix of JSON media types (RFC 6839), e.g. application/merge-patch+json.
JSON_SUFFIX = "+json"


def is_json_type(content_type: str) -> bool:
    """``Content-Type`` names JSON: ``application/json`` or ``application/*+json``, parameters ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == JSON_TYPE or (media.startswith("application/") and media.endswith(JSON_SUFFIX))


def key_matches(headers: Headers, api_key: str) -> bool:
    """``Authorization: Bearer <key>`` or ``X-API-Key: <key>`` equals ``api_key`` (constant-time)."""
    header = headers.get("authorization", "")
    given = header[len(BEARER):] if header.lower().startswith(BEARER) else headers.get("x-api-key", "")
    return bool(given) and hmac.compare_digest(given.encode(), api_key.encode())


def body_problem(body: bytes) -> str | None:
    """Why ``body`` is not a UTF-8 JSON document (a sentence for the client), or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        around = body[max(0, exc.start - CONTEXT_BYTES): exc.start + CONTEXT_BYTES]
        return (f"the request body is not valid UTF-8: byte {exc.start} (0x{body[exc.start]:02x}, near {around!r}) "
                f"{exc.reason}; send JSON encoded as UTF-8 (e.g. json.dumps(...).encode('utf-8'))")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            return (f"the JSON body ends too early (after {len(body)} bytes, line {exc.lineno}, column {exc.colno}): "
                    "it looks cut off — send the complete JSON object")
        return f"the request body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    return None


async def _respond(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    payload = json.dumps({"detail": detail}, ensure_ascii=False).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


class RequestGuard:
    """ASGI middleware guarding ``paths`` (module docstring).

    Args:
        app: the wrapped application.
        paths: request paths to guard (the JSON endpoints); others pass untouched.
        api_key: required key, or None for no authentication.
        max_body_bytes: largest accepted body.
        parse_once: parse a body with orjson and hand the result on in the scope (:data:`PARSED_BODY`); False =
            the standard library's check alone, nothing handed on (``ServeConfig.lean_search``).
    """

    def __init__(self, app: ASGIApp, *, paths: Iterable[str], api_key: str | None, max_body_bytes: int,
                 parse_once: bool = True) -> None:
        self.app = app
        self.parse_once = parse_once
        self.paths = frozenset(paths)
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes

    def _too_large(self, size: int | str) -> str:
        return (f"the request body is larger than this service accepts ({size} bytes; at most {self.max_body_bytes}); "
                "send fewer or shorter texts per request")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.api_key is not None and not key_matches(headers, self.api_key):
            await _respond(send, 401, "missing or wrong API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                           {"WWW-Authenticate": "Bearer"})
            return
        content_type = headers.get("content-type")
        if content_type is None:  # read as JSON; FastAPI's routes are told so (they refuse a body of no type)
            scope = {**scope, "headers": [*scope["headers"], (b"content-type", JSON_TYPE.encode())]}
        elif not is_json_type(content_type):
            await _respond(send, 415, f"Content-Type {content_type!r} is not JSON; send the body as JSON with "
                                      f"'Content-Type: {JSON_TYPE}'")
            return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _respond(send, 400, f"Content-Length {declared!r} is not a byte count")
                return
            if int(declared) > self.max_body_bytes:
                await _respond(send, 413, self._too_large(int(declared)))
                return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; nobody to answer
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await _respond(send, 413, self._too_large(f"more than {self.max_body_bytes}"))
                return
            more = message.get("more_body", False)
        raw = bytes(body)
        if raw:
            parsed = _parsed(raw) if self.parse_once else None
            if parsed is None:
                problem = body_problem(raw)
                if problem is not None:
                    await _respond(send, 422, problem)
                    return
            else:
                scope = {**scope, PARSED_BODY: parsed[0]}
        await self.app(scope, _replay(raw, receive), send)


def _parsed(body: bytes) -> tuple[object] | None:
    """``(value,)`` of a body orjson reads (the standard library reads every such body alike), else None."""
    try:
        return (orjson.loads(body),)
    except orjson.JSONDecodeError:
        return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read body once, then defers to the server (disconnects)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
