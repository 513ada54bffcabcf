"""Run the app with uvicorn: in the foreground (``care serve``) or in a background thread (tests, benchmarks)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from care.errors import CareError

#: Seconds to wait for a background server to start listening.
STARTUP_TIMEOUT_S = 30.0
POLL_S = 0.02


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int | None = None, **uvicorn_options: Any) -> Iterator[str]:
    """Start uvicorn in a daemon thread; yield its base URL; stop it on exit (bounded, never left running)."""
    import uvicorn

    port = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", **uvicorn_options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="care-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise CareError(f"the service did not start on {host}:{port}")
        time.sleep(POLL_S)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT_S)
