"""The service's front door (care.serve.front): POST /search enters the service's own layers straight from the
server, answers exactly as through FastAPI's stack, and is counted the same; everything else goes to FastAPI."""

from __future__ import annotations

import httpx
import pytest

from care.serve.app import create_app
from care.serve.config import ServeConfig
from care.serve.front import FrontDoorApp, wrap_layers
from care.serve.server import serve_in_thread

from .engine_config import with_config
from .test_search_path import BODIES, NOT_OBJECTS, _answers


class _Spy:
    """An ASGI layer that notes the paths it saw."""

    def __init__(self, app, *, seen: list[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.seen.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


def test_the_front_door_answers_like_fastapis_stack(engine):
    front_app, inside_app = create_app(engine), create_app(with_config(engine, search_in_front=False))
    assert front_app.front is not None and inside_app.front is None
    assert _answers(front_app, BODIES + NOT_OBJECTS) == _answers(inside_app, BODIES + NOT_OBJECTS)


@pytest.mark.parametrize("in_front", [True, False])
def test_only_post_search_skips_fastapis_stack(engine, in_front):
    seen: list[str] = []
    app = create_app(with_config(engine, search_in_front=in_front))
    app.add_middleware(_Spy, seen=seen)  # FastAPI's stack only: the front door was built before
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/search", json={"query": "头痛", "k": 2}).status_code == 200
        assert client.get("/search").status_code == 405
        assert client.get("/health").status_code == 200
        metrics = client.get("/metrics").text
    assert ("POST /search" in seen) is not in_front
    assert {"GET /search", "GET /health"} <= set(seen)
    assert 'care_requests_total{endpoint="/search",status="200"} 1.0' in metrics  # counted once either way


def test_with_fastapis_telemetry_on_search_goes_through_fastapi(engine, monkeypatch):
    seen: list[str] = []
    app = create_app(engine)
    app.add_middleware(_Spy, seen=seen)
    assert app.telemetry_on() is False  # no OpenTelemetry provider configured in the tests
    monkeypatch.setattr(app, "telemetry_on", lambda: True)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/search", json={"query": "头痛", "k": 2}).status_code == 200
    assert "POST /search" in seen  # traced by FastAPI's layer, as every other route


def test_the_front_door_keeps_the_api_key(engine, monkeypatch):
    monkeypatch.setenv("CARE_TEST_KEY", "sesame")
    app = create_app(with_config(engine, api_key_env="CARE_TEST_KEY"))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        refused = client.post("/search", json={"query": "头痛"})
        allowed = client.post("/search", json={"query": "头痛"}, headers={"Authorization": "Bearer sesame"})
    assert refused.status_code == 401 and "API key" in refused.json()["detail"]
    assert allowed.status_code == 200


def test_an_unexpected_error_on_the_front_door_is_a_counted_500_and_the_service_goes_on(engine, monkeypatch):
    app = create_app(with_config(engine))
    calls = {"n": 0}
    real_hits = app.state.engine.hits

    def fails_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real_hits(*args, **kwargs)

    monkeypatch.setattr(app.state.engine, "hits", fails_once)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        failed = client.post("/search", json={"query": "头痛"})
        after = client.post("/search", json={"query": "头痛"})
        metrics = client.get("/metrics").text
    assert failed.status_code == 500 and after.status_code == 200
    assert 'care_requests_total{endpoint="/search",status="500"} 1.0' in metrics


def test_wrap_layers_builds_innermost_first():
    order: list[str] = []

    class Named:
        def __init__(self, app, *, name: str) -> None:
            self.app, self.name = app, name

        async def __call__(self, scope, receive, send) -> None:
            order.append(self.name)
            await self.app(scope, receive, send)

    async def inner(scope, receive, send) -> None:
        order.append("app")

    import asyncio

    chain = wrap_layers(inner, [(Named, {"name": "inner"}), (Named, {"name": "outer"})])
    asyncio.run(chain({"type": "http"}, None, None))
    assert order == ["outer", "inner", "app"]


def test_search_in_front_is_a_serve_setting_that_round_trips():
    assert ServeConfig().search_in_front is True
    config = ServeConfig.from_dict({"search_in_front": False})
    assert ServeConfig.from_dict(config.to_dict()) == config
    assert FrontDoorApp.front is None  # a FastAPI app built elsewhere has no front door
