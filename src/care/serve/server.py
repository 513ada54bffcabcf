"""Run the app with uvicorn: in the foreground (``care serve``) or in a background thread (tests, benchmarks).

The one place where the service's transport settings (:class:`~care.serve.config.ServeConfig`) become
server settings: the HTTP parser and event loop (``http_parser``, ``event_loop``: httptools and uvloop by default,
the fastest of the servers measured, docs/serve.md), the request head's deadline (:mod:`care.serve.protocol`), the kept-alive connection's
idle timeout, the connection limit and the listen backlog. (The body's deadline is an ASGI layer that
:func:`care.serve.app.create_app` puts inside the request metrics, so it holds under any server.)
The socket is bound here, before uvicorn starts, so a port out of range or in use is a one-line
:class:`~care.errors.CareError` and the port printed is the one bound (port 0 = any free port).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from care.errors import CareError
from care.serve.config import ServeConfig

logger = logging.getLogger(__name__)

#: Seconds to wait for a background server to start listening.
STARTUP_TIMEOUT_S = 30.0
POLL_S = 0.02
#: The largest TCP port number; 0 asks the system for any free port.
MAX_PORT = 65535


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0 = a free port the system picks), ready for uvicorn.

    Raises:
        CareError: a port outside 0..65535, or one that cannot be bound (in use, not permitted, unknown host).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise CareError(f"--port {port}: a TCP port is 1..{MAX_PORT} (or 0 for any free port)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CareError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port "
                        "(or stop the program using it) or another --host") from None
    sock.set_inheritable(True)
    return sock


def bound_url(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (the port actually bound)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def http_protocol_class(parser: str) -> type:
    """uvicorn's protocol class for ``ServeConfig.http_parser`` (``httptools`` or ``h11``).

    Raises:
        CareError: ``httptools`` asked for but not installed (``pip install 'care-retrieval[serve]'``).
    """
    if parser == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        raise CareError("serve option http_parser 'httptools' needs the httptools package: pip install "
                        "'care-retrieval[serve]', or set http_parser to 'h11'") from None
    return HttpToolsProtocol


def event_loop_setting(loop: str) -> str:
    """uvicorn's ``loop`` for ``ServeConfig.event_loop``; ``uvloop`` falls back to ``asyncio`` where uvloop is not
    installed (Windows), with a warning."""
    if loop == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            logger.warning("serve option event_loop 'uvloop': uvloop is not installed; running the asyncio loop")
            return "asyncio"
    return loop


def _app_limits(app: Any) -> ServeConfig:
    """The ServeConfig of a care app (``app.state.engine.config``); defaults for any other ASGI app."""
    engine = getattr(getattr(app, "state", None), "engine", None)
    return engine.config if engine is not None else ServeConfig()


def build_server(app: Any, host: str = "127.0.0.1", port: int = 0, limits: ServeConfig | None = None,
                 **uvicorn_options: Any) -> Any:
    """A ``uvicorn.Server`` for ``app`` with the transport bounds of ``limits`` (default: the app's own
    ServeConfig). ``uvicorn_options`` go to ``uvicorn.Config`` (``log_level``, ``access_log``, ...)."""
    import uvicorn

    from care.serve.protocol import header_deadline_protocol

    limits = limits or _app_limits(app)
    metrics = getattr(getattr(app, "state", None), "metrics", None)
    protocol = header_deadline_protocol(http_protocol_class(limits.http_parser), limits.header_timeout_s,
                                        metrics.observe_timeout if metrics is not None else None)
    options = {"log_level": "warning", "lifespan": "on", "loop": event_loop_setting(limits.event_loop), **uvicorn_options}
    config = uvicorn.Config(app, host=host, port=port, http=protocol, timeout_keep_alive=limits.keep_alive_timeout_s,
                            limit_concurrency=limits.max_connections, backlog=limits.backlog, **options)
    return uvicorn.Server(config)


def run_foreground(app: Any, sock: socket.socket, **uvicorn_options: Any) -> None:
    """Serve ``app`` on the bound socket ``sock`` (:func:`bind_socket`) until interrupted."""
    host, port = sock.getsockname()[:2]
    build_server(app, host, port, **uvicorn_options).run(sockets=[sock])


@contextlib.contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0, **uvicorn_options: Any) -> Iterator[str]:
    """Start uvicorn in a daemon thread; yield its base URL; stop it on exit (bounded, never left running)."""
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    server = build_server(app, host, port, **uvicorn_options)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="care-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise CareError(f"the service did not start on {host}:{port}")
        time.sleep(POLL_S)
    try:
        yield bound_url(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT_S)
        sock.close()
