"""The service's front door: ``POST /search`` straight into the service's own layers, in front of FastAPI's stack.

FastAPI wraps every request in its own application layers (error page, telemetry, body limit) before the
middleware a service adds; ``/search``'s hot path (:mod:`care.serve.search_path`) has its own checks in front of it
(metrics, body deadline, CORS, guard) and needs none of them. :class:`FrontDoorApp` is the FastAPI application with
one more entry: a request for the front path goes to :attr:`FrontDoorApp.front` — the same layer classes the app's
middleware stack holds, built a second time around the hot path (:func:`wrap_layers`) — and every other request to
FastAPI as before. ``ServeConfig.search_in_front`` switches it (``care bench service-load`` measures both).

When FastAPI's own OpenTelemetry instrumentation is active (a tracer, meter or logger provider configured for the
process), every request goes through FastAPI, so ``/search`` keeps its spans and metrics there.

An exception the front chain does not handle reaches the server, which answers 500 and logs it, as FastAPI's error
layer would; the metrics layer has counted it as 500 on its way out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI

#: ``(layer class, keyword arguments)``: one ASGI middleware, built as ``cls(app, **kwargs)``.
Layer = tuple[type, dict[str, Any]]


def wrap_layers(app: Callable, layers: Sequence[Layer]) -> Callable:
    """``app`` wrapped in ``layers`` (innermost first, the order of ``FastAPI.add_middleware`` calls)."""
    for cls, kwargs in layers:
        app = cls(app, **kwargs)
    return app


class FrontDoorApp(FastAPI):
    """FastAPI whose ``POST front_path`` requests go to ``front`` (module docstring); ``front`` None = FastAPI only."""

    front: Callable | None = None
    front_path: str = "/search"

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        front = self.front
        if front is not None and scope["type"] == "http" and scope["path"] == self.front_path \
                and scope["method"] == "POST" and not self.telemetry_on():
            scope["app"] = self  # what Starlette sets for every request it handles
            await front(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def telemetry_on(self) -> bool:
        """Whether FastAPI's native OpenTelemetry layer would record this request (the check FastAPI makes on every
        request; False on a FastAPI without one)."""
        telemetry = getattr(self, "_native_telemetry", None)
        return telemetry is not None and bool(telemetry.enabled())
