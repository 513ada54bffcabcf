"""A no-op ASGI app: what one HTTP round trip costs under uvicorn before any service code runs.

``benchmarks/service_load.py`` serves it with the same uvicorn settings as ``care serve``
(uvloop, httptools, no access log) and times ``POST /search`` to it beside the real service, so
the one-client overhead splits into the transport floor and the service's own share. The answer is
a real ``/search`` response read once from the file named by ``CARE_FLOOR_BODY`` (so the floor
carries the same bytes as the service's answers), or a small empty hit list when it is unset.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The environment variable naming the file whose bytes are the answer.
BODY_FILE_ENV = "CARE_FLOOR_BODY"
#: The answer when no file is named: the envelope of an empty hit list.
EMPTY_BODY = b'{"hits":[],"k":10,"took_ms":0.0}'
BODY = Path(os.environ[BODY_FILE_ENV]).read_bytes() if os.environ.get(BODY_FILE_ENV) else EMPTY_BODY


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the request body to its end, answer 200 with :data:`BODY`."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})
