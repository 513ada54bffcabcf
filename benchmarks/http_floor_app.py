"""Two reference ASGI apps for ``benchmarks/service_load.py``, served with the same uvicorn settings as
``care serve`` (uvloop, httptools, no access log) and timed beside it:

* ``app`` — a no-op: what one HTTP round trip costs before any code runs. The answer is a real
  ``/search`` response read once from the file named by ``CARE_FLOOR_BODY`` (so the floor carries the
  same bytes as the service's answers), or a small empty hit list when it is unset.
* ``thin_app`` — the thinnest HTTP service there is around the same engine: the body parsed with orjson,
  ``engine.search_vectors`` + ``engine.hits`` called at once on the event loop, the answer written
  with the service's own ``search_body``; no checks, no micro-batcher, no middleware, no FastAPI. What
  ``care serve`` costs over it is what the service's own code costs; what it costs over the bare loop
  is what any HTTP service in its own process costs on this machine (the client waits for the model,
  so both processes go idle and are woken again). The engine is loaded at start-up from
  ``CARE_THIN_INDEX`` and ``CARE_THIN_ONNX`` (int8), with ``CARE_THIN_THREADS`` encoder threads. It
  answers with ``Server-Timing: app;dur=<ms>`` as ``care serve`` does.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

#: The environment variable naming the file whose bytes are the answer.
BODY_FILE_ENV = "CARE_FLOOR_BODY"
#: The answer when no file is named: the envelope of an empty hit list.
EMPTY_BODY = b'{"hits":[],"k":10,"took_ms":0.0}'
BODY = Path(os.environ[BODY_FILE_ENV]).read_bytes() if os.environ.get(BODY_FILE_ENV) else EMPTY_BODY
#: The environment variables of ``thin_app``'s engine.
THIN_INDEX_ENV, THIN_ONNX_ENV, THIN_THREADS_ENV = "CARE_THIN_INDEX", "CARE_THIN_ONNX", "CARE_THIN_THREADS"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the request body to its end, answer 200 with :data:`BODY`."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})


def _thin_engine() -> Any:
    from care.serve.engine import load_engine

    return load_engine(os.environ[THIN_INDEX_ENV], onnx_dir=os.environ[THIN_ONNX_ENV], int8=True,
                       onnx_threads=int(os.environ.get(THIN_THREADS_ENV, "1")))


ENGINE = _thin_engine() if os.environ.get(THIN_INDEX_ENV) else None


async def thin_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``{"query": ..., "k": ...}`` -> the ``/search`` answer of :data:`ENGINE`, with nothing else on the way."""
    import orjson

    from care.serve.search_path import search_body

    if scope["type"] != "http":
        return
    started = time.perf_counter()
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = orjson.loads(body) if body else {"query": "-", "k": 10}
    k = int(request.get("k", 10))
    (found,) = ENGINE.search_vectors([request["query"]], [k], instruction=None)
    answer = search_body(ENGINE.hits(found, k, None), k, round((time.perf_counter() - started) * 1000, 3))
    timing = f"app;dur={(time.perf_counter() - started) * 1000:.3f}".encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode()),
                            (b"server-timing", timing)]})
    await send({"type": "http.response.body", "body": answer})
