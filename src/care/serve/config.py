"""Settings of ``care serve`` as a dataclass that round-trips to JSON (no magic numbers in the app)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from care.config import Config, check_field_types
from care.errors import CareError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Largest request body (bytes). The largest valid request is max_inputs (256) texts of max_query_chars
#: (2048) characters; at 3 UTF-8 bytes per Chinese character that is 1.5 MiB (a client that escapes
#: every character as \uXXXX sends 6 bytes each: 3 MiB). 4 MiB takes both; a larger body is refused
#: with 413 before it is read or parsed.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds a client has from opening a connection (or sending the first byte of its next request on a
#: kept-alive one) to sending the whole request head. A real client sends it in one packet (milliseconds
#: even over a phone network); 10 s is Go's usual ReadHeaderTimeout, half Apache mod_reqtimeout's 20 s.
DEFAULT_HEADER_TIMEOUT_S = 10.0
#: Seconds a client has, after its headers, to send the whole body. The largest valid body (4 MiB) takes
#: 30 s at about 1 Mbit/s; a request of ordinary size (a few KB) fits in one packet.
DEFAULT_BODY_TIMEOUT_S = 30.0
#: Seconds an idle kept-alive connection stays open between requests (uvicorn's default).
DEFAULT_KEEP_ALIVE_TIMEOUT_S = 5.0
#: Open connections and requests in progress before new requests get 503 (uvicorn's limit_concurrency).
#: Below the usual soft limit of 1024 open files per process, so the limit answers before the process
#: runs out of file descriptors (which would fail every accept, including normal clients').
DEFAULT_MAX_CONNECTIONS = 900
#: Connections the kernel queues for the service before it accepts them (listen(2) backlog; uvicorn's default).
DEFAULT_BACKLOG = 2048
#: uvicorn's HTTP/1.1 parsers: ``httptools`` (llhttp, C) or ``h11`` (pure Python).
HttpParser = Literal["httptools", "h11"]
#: uvicorn's event loops: ``uvloop`` (libuv, C) or the standard library's ``asyncio``.
EventLoop = Literal["uvloop", "asyncio"]


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
        inline_max_items: with continuous batching, a query-side request of at most this many texts that
            finds the service idle (nothing waiting or running, and the last batch held one request:
            sequential traffic) is encoded at once on the event loop's thread instead of through the
            batcher's queue and worker thread (saves the hand-off, 0.2-0.5 ms on 2 cores); 0 = never.
            Document-side work always goes through the worker thread.
        fast_search: answer ``POST /search`` with a plain ASGI layer (:mod:`care.serve.search_path`: same
            checks, same answers, without FastAPI's per-request routing and dependency work); False = through
            FastAPI's route, as a comparison for ``care bench service-load``.
        server_timing: add a W3C ``Server-Timing`` header to every answer: ``app;dur=<ms>`` (the service's
            time from the request reaching its outermost layer to the answer's start) and, on ``/search``,
            ``search;dur=<ms>`` (the handler: checks, encode, index search, lookup). Browsers' developer tools
            and ``care bench service-load`` read it to split a request's time into the network and the
            service; False leaves it out (a public service that does not want to show its timings).
        max_queue: texts waiting for the encoder before new requests get 503 (back-pressure).
        filter_overfetch: with filters, ``k * filter_overfetch`` candidates are searched, then filtered.
        max_candidates: cap on searched candidates when filtering.
        api_key_env: environment variable holding the API key; None = no authentication.
        model_name: the name the query side is served under (``/v1/models``; the ``model`` that
            ``/v1/embeddings`` accepts and reports); the document side, when loaded, is ``<model_name>:document``.
        max_body_bytes: largest request body; larger -> 413 (checked after the API key, before reading).
        header_timeout_s: seconds a client has to send a request's whole head (request line and headers),
            counted from the connection's opening or, on a kept-alive connection, from its next request's first
            byte; later, the server answers 408 (when some bytes came) and closes the connection.
        body_timeout_s: seconds a client has, after the headers, to send the whole body; later -> 408 and the
            connection is closed.
        keep_alive_timeout_s: seconds an idle kept-alive connection stays open between requests.
        max_connections: open connections plus requests in progress; at the limit, new requests get 503
            (each timeout above bounds how long a slow client can hold one).
        backlog: connections the kernel holds waiting to be accepted (listen backlog).
        lean_search: with ``fast_search``, check a ``/search`` body of the common shape (a text query, an integer
            ``k``, no filters) by hand and parse the body once with orjson (:mod:`care.serve.search_path`); any other
            body still goes through the pydantic model, which words its refusal exactly as before. False = every
            body through the model and the guard's second, stdlib parse (the path before issue 59, kept as the
            comparison ``care serve bench`` measures beside it).
        search_in_front: with ``fast_search``, ``POST /search`` enters the service's own layers (metrics, body
            deadline, CORS, guard, the hot path) straight from the server, in front of FastAPI's application stack
            (its error, telemetry and body-limit layers, which the hot path's own checks already cover: an unexpected
            error is still answered 500 and counted, by the server); False = those layers inside FastAPI's stack,
            as a comparison for ``care bench service-load``. Every other request goes through FastAPI either way, and
            so does ``/search`` while FastAPI's OpenTelemetry layer is active (a provider configured), to keep its spans.
        http_parser: the HTTP/1.1 parser uvicorn runs: ``httptools`` (default: measured faster, docs/serve.md) or
            ``h11``.
        event_loop: ``uvloop`` (default) or ``asyncio``.
        cors_origins: browser origins (``https://app.example.org``) allowed to call the API from their pages
            (CORS); empty (default) = same origin only; ``"*"`` = any origin.
    """

    max_query_chars: int = 2048
    max_inputs: int = 256
    max_k: int = 100
    default_k: int = 10
    max_batch_size: int = 32
    max_wait_ms: float = 0.0
    max_queue: int = 4096
    inline_max_items: int = 4
    fast_search: bool = True
    lean_search: bool = True
    search_in_front: bool = True
    server_timing: bool = True
    filter_overfetch: int = 10
    max_candidates: int = 1000
    api_key_env: str | None = None
    model_name: str = "care"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    keep_alive_timeout_s: float = DEFAULT_KEEP_ALIVE_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    backlog: int = DEFAULT_BACKLOG
    cors_origins: tuple[str, ...] = ()
    http_parser: HttpParser = "httptools"
    event_loop: EventLoop = "uvloop"

    def __post_init__(self) -> None:
        for name in ("max_query_chars", "max_inputs", "max_k", "default_k", "max_batch_size", "max_queue",
                     "filter_overfetch", "max_candidates", "max_body_bytes", "max_connections", "backlog"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"serve option {name} must be >= 1, got {getattr(self, name)}")
        if self.inline_max_items < 0:
            raise CareError(f"serve option inline_max_items must be >= 0 (0 = never inline), got {self.inline_max_items}")
        if self.max_wait_ms < 0:
            raise CareError(f"serve option max_wait_ms must be >= 0, got {self.max_wait_ms}")
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_timeout_s"):
            if not float(getattr(self, name)) > 0:
                raise CareError(f"serve option {name} must be > 0 seconds, got {getattr(self, name)}")
        object.__setattr__(self, "cors_origins", tuple(self.cors_origins))  # a JSON list arrives as a list
        for origin in self.cors_origins:
            if origin != "*" and ("://" not in origin or origin.endswith("/")):
                raise CareError(f"serve option cors_origins: {origin!r} is not an origin; write scheme://host[:port] "
                                "without a path or trailing slash (e.g. https://app.example.org), or '*' for any")
        for name, kind in (("http_parser", HttpParser), ("event_loop", EventLoop)):
            if getattr(self, name) not in get_args(kind):
                raise CareError(f"serve option {name} must be one of {list(get_args(kind))}, got {getattr(self, name)!r}")
        if self.default_k > self.max_k:
            raise CareError(f"default_k ({self.default_k}) is larger than max_k ({self.max_k})")

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "serve config") -> ServeConfig:
        """Build from parsed JSON; unknown fields and values of the wrong type are refused naming ``source``."""
        if not isinstance(data, dict):
            raise CareError(f"{source}: expected a JSON object of ServeConfig fields (max_k, max_query_chars, ...), "
                            f"got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        if set(data) - known:
            raise CareError(f"{source}: unknown serve option(s) {sorted(set(data) - known)}; known: {sorted(known)}")
        check_field_types(cls, data, source)
        try:
            return cls(**data)
        except CareError as exc:
            raise CareError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> ServeConfig:
        """Read a JSON file of fields (``care serve --config``).

        Raises:
            CareError: a missing or unreadable file, malformed JSON (line and column named), an unknown
                field or a value of the wrong type — each naming the file.
        """
        path = Path(path)
        if not path.is_file():
            raise CareError(f"serve config {path} not found")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise CareError(f"{path}: not UTF-8 text (byte {exc.start}); save the serve config as UTF-8") from None
        except json.JSONDecodeError as exc:
            raise CareError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        return cls.from_dict(data, source=str(path))
