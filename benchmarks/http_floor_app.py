"""A no-op ASGI app: what one HTTP round trip costs under uvicorn before any service code runs.

``benchmarks/service_load.py`` serves it with the same uvicorn settings as ``care serve``
(uvloop, httptools, no access log) and times ``POST /search`` to it beside the real service, so
the one-client overhead splits into the transport floor and the service's own share.
"""

from __future__ import annotations

from typing import Any

#: A fixed answer the size of a small hit list's envelope.
BODY = b'{"hits":[],"k":10,"took_ms":0.0}'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the request body to its end, answer 200 with :data:`BODY`."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})
