"""A deadline on the request body: a client that sends its body slowly is answered 408 and disconnected.

The head's deadline is the server's (:mod:`care.serve.protocol`); once the head is in, the application
runs, so the body's deadline is this ASGI layer, which works under any ASGI server. The clock starts
when the application is called (headers complete); every ``receive()`` that waits for body bytes is
bounded by what is left of ``timeout_s``. When it runs out, the layers inside are told the client left
(``http.disconnect``, which each of them already handles: nothing is processed), whatever they still
send is dropped, and the client gets ``408 {"detail": ...}`` with ``connection: close``. Once the whole
body has arrived, ``receive()`` is passed through unbounded (a streaming answer may wait on it for a
disconnect).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

#: The label the metrics callback receives for a body that timed out.
BODY_PHASE = "body"


class BodyDeadline:
    """ASGI middleware bounding the time a request's body takes to arrive (module docstring).

    Args:
        app: the wrapped application.
        timeout_s: seconds from the application's call to the body's last byte.
        on_timeout: called with ``"body"`` each time a request is answered 408 for it (the service's metrics).
    """

    def __init__(self, app: ASGIApp, *, timeout_s: float, on_timeout: Callable[[str], None] | None = None) -> None:
        self.app, self.timeout_s, self.on_timeout = app, timeout_s, on_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # one timer per request (an asyncio.timeout() around every receive() cost ~25 us a request): when it
        # fires while the body is still awaited, it cancels the waiting task, and the wait turns into a disconnect
        loop = asyncio.get_running_loop()
        body_done = timed_out = started = False
        waiting: asyncio.Task | None = None

        def expire() -> None:
            nonlocal timed_out
            timed_out = True
            if waiting is not None:
                waiting.cancel()

        timer = loop.call_later(self.timeout_s, expire)

        async def bounded_receive() -> Message:
            nonlocal body_done, waiting
            if timed_out:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()
            waiting = asyncio.current_task()
            try:
                message = await receive()
            except asyncio.CancelledError:
                if not timed_out:
                    raise
                if sys.version_info >= (3, 11):
                    waiting.uncancel()  # type: ignore[union-attr]  # our cancel, handled here
                return {"type": "http.disconnect"}
            finally:
                waiting = None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
                timer.cancel()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the client is answered 408 below; what the app sends now goes nowhere
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, guarded_send)
        except ClientDisconnect:
            if not timed_out:
                raise
        finally:
            timer.cancel()
        if timed_out and not started:
            await _request_timeout(send, self.timeout_s)
            logger.info("answered 408 to %s %s from %s: its body took over %gs", scope.get("method"), scope.get("path"),
                        scope.get("client"), self.timeout_s)
            if self.on_timeout is not None:
                self.on_timeout(BODY_PHASE)


async def _request_timeout(send: Callable[[Message], Awaitable[Any]], timeout_s: float) -> None:
    """408 with ``connection: close`` (the rest of the body is not read)."""
    detail = f"the request body did not arrive within {timeout_s:g}s; send the whole body at once"
    payload = json.dumps({"detail": detail}).encode("utf-8")
    await send({"type": "http.response.start", "status": 408,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
