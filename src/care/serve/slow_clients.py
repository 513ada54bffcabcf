"""Slow clients (slowloris) against a service: sockets that send a request a byte at a time, and how long
the server lets each live.

Each socket opens a connection and sends its request one byte every ``interval_s`` — either the head
(request line and headers, never finished: ``"headers"``) or a complete head followed by a body that
never ends (``"body"``) — until the server closes it or ``duration_s`` passes; with ``reopen``, a
closed socket is replaced by a new one at once (as a slowloris attacker does), so ``n`` stay open
throughout. Reported per socket: its kind, the seconds from connecting to the server's close (None if
still open at the end), how long it was open, and the status line the server answered with, if any.
Used by ``tests/serve/test_protocol.py`` and ``benchmarks/bench_service_hostile.py --slow-clients``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from care.errors import CareError

HEADERS = "headers"
BODY = "body"
KINDS = (HEADERS, BODY)
#: A request head a slow client never finishes: one header value that grows by a byte each interval.
_ENDLESS_HEAD = b"POST /search HTTP/1.1\r\nHost: care\r\nContent-Type: application/json\r\nX-Slow: "
#: Declared body size of a slow-body client: far more than it will ever send.
_SLOW_BODY_BYTES = 1 << 20
#: Bytes read at a time while waiting for the server's answer or close.
_READ_BYTES = 65536


@dataclass
class SlowSocket:
    """What happened to one slow socket."""

    kind: str
    closed_after_s: float | None  # connect -> server close; None = still open when the run ended
    open_s: float  # connect -> server close or the run's end
    answer: str | None  # the status line the server sent before closing, if any
    bytes_sent: int


def _payload(kind: str, host: str) -> bytes:
    if kind == HEADERS:
        return _ENDLESS_HEAD + b"x" * _SLOW_BODY_BYTES
    head = (f"POST /search HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {_SLOW_BODY_BYTES}\r\n\r\n").encode()
    return head + b'{"query": "' + b"x" * _SLOW_BODY_BYTES


async def _slow_socket(host: str, port: int, kind: str, interval_s: float, stop_at: float) -> SlowSocket:
    """One slow client: the head in one packet for ``body`` (then the body a byte at a time), or the head a
    byte at a time for ``headers``; stops when the server closes or at ``stop_at`` (loop time)."""
    loop = asyncio.get_running_loop()
    opened = loop.time()
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:  # refused or reset before the first byte: the server is full or gone
        return SlowSocket(kind, 0.0, 0.0, f"no connection ({type(exc).__name__})", 0)
    payload = _payload(kind, host)
    sent = payload.index(b"\r\n\r\n") + 4 if kind == BODY else 1
    received = bytearray()
    closed_at: float | None = None
    try:
        writer.write(payload[:sent])
        while loop.time() < stop_at:
            try:
                chunk = await asyncio.wait_for(reader.read(_READ_BYTES), timeout=min(interval_s, stop_at - loop.time()))
            except asyncio.TimeoutError:
                writer.write(payload[sent:sent + 1])
                sent += 1
                continue
            except (ConnectionError, OSError):
                chunk = b""
            if not chunk:
                closed_at = loop.time()
                break
            received += chunk
    except (ConnectionError, OSError):
        closed_at = loop.time()
    finally:
        writer.close()
    answer = bytes(received).split(b"\r\n", 1)[0].decode("latin-1") if received else None
    lived = round((closed_at if closed_at is not None else loop.time()) - opened, 3)
    return SlowSocket(kind, None if closed_at is None else lived, lived, answer, sent)


async def run_slow_clients_async(base_url: str, *, n: int, duration_s: float, interval_s: float = 1.0,
                                 kinds: tuple[str, ...] = KINDS, reopen: bool = False) -> list[SlowSocket]:
    """``n`` slow sockets at once (kinds taken in turn), each until the server closes it or ``duration_s``;
    with ``reopen``, each closed one is replaced until ``duration_s``. Every socket's outcome, in no order."""
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + duration_s
    results: list[SlowSocket] = []

    async def slot(kind: str) -> None:
        while True:
            outcome = await _slow_socket(host, port, kind, interval_s, stop_at)
            results.append(outcome)
            if not reopen or outcome.closed_after_s is None or loop.time() >= stop_at:
                return

    await asyncio.gather(*(slot(kinds[i % len(kinds)]) for i in range(n)))
    return results


def _run_in_child(base_url: str, options: dict, conn: Any) -> None:
    conn.send(asyncio.run(run_slow_clients_async(base_url, **options)))
    conn.close()


class SlowClients:
    """:func:`run_slow_clients_async` in the background, so normal traffic can be measured meanwhile:
    ``with SlowClients(url, n=60, duration_s=40) as slow: ...``, then ``slow.join()`` (every socket's outcome).

    Args:
        base_url: the service.
        process: run the sockets in a child process of their own (as an attacker elsewhere would) rather than a
            thread of this one, where their event loop would take turns with the caller's for the interpreter.
        options: :func:`run_slow_clients_async`'s keyword arguments (``n``, ``duration_s``, ...).
    """

    def __init__(self, base_url: str, *, process: bool = False, **options: Any) -> None:
        self.base_url, self.options, self.process = base_url, options, process
        self.results: list[SlowSocket] = []
        self._conn: Any = None
        if process:
            # fork: the child needs nothing but this module's functions, and is running at once
            parent, child = multiprocessing.get_context("fork").Pipe(duplex=False)
            self._conn = parent
            self._worker: Any = multiprocessing.get_context("fork").Process(
                target=_run_in_child, args=(base_url, options, child), name="care-slow-clients", daemon=True)
        else:
            self._worker = threading.Thread(target=self._run, name="care-slow-clients", daemon=True)

    def _run(self) -> None:
        self.results = asyncio.run(run_slow_clients_async(self.base_url, **self.options))

    def __enter__(self) -> SlowClients:
        self._worker.start()
        return self

    def running(self) -> bool:
        """Some sockets are still open."""
        return self._worker.is_alive()

    def join(self, timeout: float | None = None) -> list[SlowSocket]:
        """Wait for every socket to end; their results."""
        if self._conn is not None and not self.results:
            try:
                if self._conn.poll(timeout):
                    self.results = self._conn.recv()
            except EOFError:
                raise CareError("the slow-client process ended without its results; see its traceback above") from None
        self._worker.join(timeout)
        return self.results

    def __exit__(self, *exc: object) -> None:
        self.join()
