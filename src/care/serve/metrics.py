"""Prometheus metrics of the service, in a registry of its own (several apps can live in one process)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import ClientDisconnect

#: Latency buckets in seconds (1 ms .. 10 s).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


#: ``Server-Timing`` metric names: the whole service (outermost layer) and the ``/search`` handler.
APP_TIMING = "app"
SEARCH_TIMING = "search"


SERVER_TIMING = "server-timing"
#: The status a request is counted under when its client hung up before the answer started (nginx's
#: "client closed request"); never sent to anyone, so a 5xx alert does not fire for someone else's network.
CLIENT_CLOSED_STATUS = "499"

logger = logging.getLogger(__name__)


def server_timing_value(name: str, ms: float) -> str:
    """One W3C ``Server-Timing`` metric: ``name;dur=<ms>``."""
    return f"{name};dur={ms:.3f}"


def server_timing_header(name: str, ms: float) -> tuple[bytes, bytes]:
    """One ``Server-Timing`` header as an ASGI header pair; a response may carry several, one per metric."""
    return SERVER_TIMING.encode(), server_timing_value(name, ms).encode()


def parse_server_timing(values: list[str]) -> dict[str, float]:
    """``{name: milliseconds}`` from a response's ``Server-Timing`` header values (one metric or a
    comma-separated list each, ``name;dur=<ms>``); a metric without ``dur`` is skipped."""
    out: dict[str, float] = {}
    for value in values:
        for metric in value.split(","):
            name, *params = (part.strip() for part in metric.split(";"))
            for param in params:
                key, _, number = param.partition("=")
                if key.strip().lower() == "dur" and name:
                    out[name] = float(number)
    return out


class ServiceMetrics:
    """Request counts and latencies per endpoint, batch sizes, queue depth, index size."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("care_requests", "HTTP requests by endpoint and status code",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("care_request_seconds", "HTTP request latency", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.batch_size = Histogram("care_batch_size", "Items per encoder call (micro-batch size)", ["kind"],
                                    buckets=BATCH_BUCKETS, registry=self.registry)
        self.batch_seconds = Histogram("care_batch_seconds", "Seconds per encoder (+ index) call", ["kind"],
                                       buckets=LATENCY_BUCKETS, registry=self.registry)
        self.queue = Gauge("care_queue_items", "Items waiting for the encoder", registry=self.registry)
        self.documents = Gauge("care_index_documents", "Documents in the index", registry=self.registry)
        self.disconnects = Counter("care_client_disconnects", "Requests whose client hung up before the answer "
                                   "started (also counted in care_requests_total as status 499)", ["endpoint"],
                                   registry=self.registry)
        self.timeouts = Counter("care_client_timeouts", "Connections closed because a client sent its request "
                                "headers or body too slowly", ["phase"], registry=self.registry)
        self._children: dict[tuple, Any] = {}

    def child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once per label set (``labels`` costs a few microseconds a call,
        paid several times per request otherwise)."""
        key = (metric, *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def observe_batch(self, key: Hashable, n_items: int, seconds: float) -> None:
        kind = str(key[0]) if isinstance(key, tuple) else str(key)
        self.child(self.batch_size, kind).observe(n_items)
        self.child(self.batch_seconds, kind).observe(seconds)

    def observe_timeout(self, phase: str) -> None:
        """One connection closed for a slow request ``phase`` (``headers`` or ``body``)."""
        self.child(self.timeouts, phase).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestMetrics:
    """ASGI middleware: counts every HTTP request by endpoint and status and observes its latency.

    A client that hangs up before the answer starts (mid-body) is counted
    under status ``499`` (:data:`CLIENT_CLOSED_STATUS`) and in ``care_client_disconnects_total``, logged
    at info, and its ``ClientDisconnect`` is not an error: no 500 is counted, sent or logged.

    A plain ASGI wrapper rather than Starlette's ``BaseHTTPMiddleware`` (``@app.middleware("http")``),
    which runs each request through an extra task and memory stream: on 2 cores that cost about as
    much per request as encoding a query (the ``service_load`` records; ``care bench service-load``).

    Args:
        app: the wrapped ASGI app.
        metrics: where the counts go.
        routes: paths counted under their own name; any other path is counted as ``other``.
        queue_depth: read after each request to update the queue gauge.
        server_timing: add ``Server-Timing: app;dur=<ms>`` to every answer (:func:`server_timing_header`):
            the time from this layer receiving the request to the answer's start.
    """

    def __init__(self, app: Callable, *, metrics: ServiceMetrics, routes: tuple[str, ...],
                 queue_depth: Callable[[], int], server_timing: bool = False) -> None:
        self.app, self.metrics, self.routes, self.queue_depth = app, metrics, frozenset(routes), queue_depth
        self.server_timing = server_timing

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        route = scope["path"] if scope["path"] in self.routes else "other"
        status = [500]  # what the client gets when the app raises before answering
        answered = [False]  # the answer's start was sent
        gone = [False]  # the client hung up before that

        async def watch_receive() -> dict:
            message = await receive()
            if message["type"] == "http.disconnect" and not answered[0]:
                gone[0] = True
            return message

        async def record_status(message: dict) -> None:
            if message["type"] == "http.response.start" and not gone[0]:
                status[0], answered[0] = message["status"], True
                if self.server_timing:
                    timing = server_timing_header(APP_TIMING, (time.perf_counter() - started) * 1000)
                    message = {**message, "headers": [*message.get("headers", ()), timing]}
            await send(message)

        try:
            await self.app(scope, watch_receive, record_status)
        except ClientDisconnect:
            if not gone[0]:
                raise
        finally:
            if gone[0]:
                status[0] = CLIENT_CLOSED_STATUS
                self.metrics.child(self.metrics.disconnects, route).inc()
                logger.info("%s %s: the client hung up before the answer", scope.get("method"), scope["path"])
            self.metrics.child(self.metrics.requests, route, str(status[0])).inc()
            self.metrics.child(self.metrics.latency, route).observe(time.perf_counter() - started)
            self.metrics.queue.set(self.queue_depth())
