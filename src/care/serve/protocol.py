"""uvicorn's HTTP protocol with a deadline on the request head: a client that opens a connection and
sends its request line and headers slowly (slowloris) is answered 408 and disconnected.

uvicorn bounds an idle kept-alive connection (``timeout_keep_alive``) but not the time a client takes
to send a request's head: its keep-alive timer is armed only after a response, and the first byte a
client sends cancels it, so a connection that trickles one header byte a second stays open for ever
(issue 60: 60 such sockets were all still open after 45 s). :func:`header_deadline_protocol` returns a
subclass of uvicorn's protocol class (httptools' or h11's, whichever uvicorn picks) that arms a timer
when a connection opens, and again when the first byte of the next request arrives on a kept-alive
connection, and cancels it once the head is complete — the moment uvicorn hands the request to the
application, seen as a new request/response cycle. The body's own deadline is an ASGI layer
(:mod:`care.serve.body_deadline`): after the head, the application is running and answers for itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

#: The answer to a client whose request head did not arrive in time (it is closed right after).
REQUEST_TIMEOUT_ANSWER = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                          b"content-length: %d\r\nconnection: close\r\n\r\n%s")
#: What the 408 says (the service's errors are JSON ``{"detail": ...}``).
HEAD_TIMEOUT_DETAIL = b'{"detail": "the request headers did not arrive within %gs; send the whole request at once"}'
#: The label the metrics callback receives for a head that timed out.
HEADERS_PHASE = "headers"


def header_deadline_protocol(base: type[asyncio.Protocol], timeout_s: float,
                             on_timeout: Callable[[str], None] | None = None) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's HTTP protocol class ``base`` that closes a connection whose request head
    takes longer than ``timeout_s`` seconds.

    Args:
        base: ``uvicorn.protocols.http.httptools_impl.HttpToolsProtocol`` or ``h11_impl.H11Protocol`` (both
            keep the current request in ``self.cycle`` and the socket in ``self.transport``).
        timeout_s: seconds from a connection's opening, or from the first byte of a request on a kept-alive
            connection, to the end of the request's headers.
        on_timeout: called with ``"headers"`` each time a connection is closed for it (the service's metrics).

    Returns:
        The protocol class to give ``uvicorn.Config(http=...)``.
    """

    class HeaderDeadlineProtocol(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._head_cycle: Any = None  # the cycle that was current when the timer was armed
            self._head_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_deadline()

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm_head_deadline()  # the first byte of the next request on a kept-alive connection
            if self._head_timer is not None:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._head_timer is not None and self.cycle is not self._head_cycle:
                self._cancel_head_deadline()  # the head is complete: uvicorn started the request's cycle

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_deadline()
            super().connection_lost(exc)

        def _arm_head_deadline(self) -> None:
            self._head_cycle, self._head_bytes = self.cycle, 0
            self._head_timer = self.loop.call_later(timeout_s, self._head_timed_out)

        def _cancel_head_deadline(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing():
                return
            if self._head_bytes:  # a client that sent nothing (an idle pre-connect) is closed without an answer
                detail = HEAD_TIMEOUT_DETAIL % timeout_s
                self.transport.write(REQUEST_TIMEOUT_ANSWER % (len(detail), detail))
            self.transport.close()
            logger.info("closed a connection from %s: its request headers took over %gs (%d bytes received)",
                        self.client, timeout_s, self._head_bytes)
            if on_timeout is not None:
                on_timeout(HEADERS_PHASE)

    HeaderDeadlineProtocol.__name__ = HeaderDeadlineProtocol.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadlineProtocol
