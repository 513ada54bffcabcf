"""The clients that measure a service: one kept-alive connection for the one-client timing, and many concurrent
kept-alive connections for throughput, each as light as a client can be so that on shared cores the client takes
as little as possible from the service it measures.

* :class:`OneClient` — one kept-alive socket, answers read with httptools' C parser (reconnects once when the server
  closed an idle connection); ``post`` returns the status, the body and the ``Server-Timing`` header.
* :func:`run_clients` — ``clients`` asyncio connections, each sending its next ``POST`` as soon as its answer is
  complete, for ``seconds``; answers are read with httptools' C parser (the parser uvicorn uses) instead of a
  full client library (httpx spends about as much CPU per request as the service's whole HTTP layer). Returns
  q/s and latency percentiles (:class:`LoadReport`).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from collections.abc import Sequence
from urllib.parse import urlsplit

import numpy as np

from care.serve.loadgen import LoadReport

#: Seconds a request may take before the client gives up on it.
REQUEST_TIMEOUT_S = 30.0
SEARCH_PATH = "/search"
JSON_HEADERS = {"Content-Type": "application/json"}
#: Bytes read from the socket at a time.
RECV_BYTES = 65536
#: Percentiles reported per load level.
PERCENTILES = (50, 90, 99)


def _address(url: str) -> tuple[str, int]:
    where = urlsplit(url)
    return where.hostname or "127.0.0.1", where.port or 80


class OneClient:
    """One kept-alive HTTP/1.1 connection to ``url`` (``http://host:port``): a blocking socket, the request's bytes
    written at once, the answer read with httptools' parser (the standard library's ``http.client`` parses headers
    in Python: about 0.1 ms a request here, as much as the transport itself). Reconnects once when the server closed
    an idle connection (its keep-alive timeout)."""

    def __init__(self, url: str, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.host, self.port = _address(url)
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def post(self, path: str, body: bytes) -> tuple[int, bytes, str]:
        """``(status, body, Server-Timing header or "")`` of one ``POST``."""
        raw = request_bytes(self.host, self.port, path, body)
        for attempt in (1, 2):
            if self.sock is None:
                self.sock = self._connect()
            try:
                return self._exchange(raw)
            except (BrokenPipeError, ConnectionResetError, ConnectionError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _exchange(self, raw: bytes) -> tuple[int, bytes, str]:
        import httptools

        assert self.sock is not None
        answer = _Answer()
        parser = httptools.HttpResponseParser(answer)
        self.sock.sendall(raw)
        while not answer.complete:
            data = self.sock.recv(RECV_BYTES)
            if not data:
                raise ConnectionError("the server closed the connection")
            parser.feed_data(data)
        return parser.get_status_code(), b"".join(answer.body), answer.server_timing

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class _Answer:
    """httptools callbacks collecting one answer."""

    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.server_timing = ""
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"server-timing":
            self.server_timing = f"{self.server_timing}, {value.decode()}" if self.server_timing else value.decode()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _Connection(asyncio.Protocol):
    """One client connection: writes a request, parses the answer with httptools, resolves a future."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(self.parser.get_status_code())

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("the server closed the connection"))
        if not self.lost.done():
            self.lost.set_result(None)

    async def request(self, raw: bytes) -> int:
        assert self.transport is not None
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await asyncio.wait_for(self.done, REQUEST_TIMEOUT_S)


def request_bytes(host: str, port: int, path: str, body: bytes) -> bytes:
    """The bytes of one kept-alive ``POST`` with a JSON body."""
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


async def run_clients_async(url: str, bodies: Sequence[bytes], *, clients: int, seconds: float,
                            path: str = SEARCH_PATH) -> LoadReport:
    """``clients`` connections each posting the next of ``bodies`` (cycled) as soon as its answer is in."""
    host, port = _address(url)
    raws = [request_bytes(host, port, path, body) for body in bodies]
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    status: Counter = Counter()
    dropped = [0]
    counter = [0]

    async def one(deadline: float) -> None:
        transport, conn = await loop.create_connection(_Connection, host, port)
        try:
            while time.perf_counter() < deadline:
                raw = raws[counter[0] % len(raws)]
                counter[0] += 1
                started = time.perf_counter()
                try:
                    code = await conn.request(raw)
                except (ConnectionError, TimeoutError):
                    dropped[0] += 1
                    transport.close()
                    transport, conn = await loop.create_connection(_Connection, host, port)
                    continue
                latencies.append(time.perf_counter() - started)
                status[str(code)] += 1
        finally:
            transport.close()

    started = time.perf_counter()
    await asyncio.gather(*(one(started + seconds) for _ in range(clients)))
    elapsed = time.perf_counter() - started
    lat = np.asarray(latencies) * 1000 if latencies else np.asarray([np.nan])
    p50, p90, p99 = (round(float(np.percentile(lat, q)), 3) for q in PERCENTILES)
    return LoadReport(clients=clients, duration_s=round(elapsed, 3), requests=len(latencies),
                      qps=round(len(latencies) / elapsed, 1), p50_ms=p50, p90_ms=p90, p99_ms=p99,
                      status=dict(status), dropped=dropped[0])


def run_clients(url: str, bodies: Sequence[bytes], *, clients: int, seconds: float, path: str = SEARCH_PATH) -> LoadReport:
    """:func:`run_clients_async` on its own event loop (uvloop's when installed)."""
    coroutine = run_clients_async(url, bodies, clients=clients, seconds=seconds, path=path)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
