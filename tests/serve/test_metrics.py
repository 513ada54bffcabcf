"""The service's request metrics and its ``Server-Timing`` header."""

from __future__ import annotations

import httpx
import pytest

from care.serve.app import create_app
from care.serve.metrics import APP_TIMING, SEARCH_TIMING, parse_server_timing
from care.serve.server import serve_in_thread

from .engine_config import with_config


def _timings(app, path: str = "/search", body: dict | None = None) -> tuple[int, dict[str, float]]:
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        if body is None:
            response = client.get(path)
        else:
            response = client.post(path, json=body)
        return response.status_code, parse_server_timing(response.headers.get_list("server-timing"))


@pytest.mark.parametrize("fast_search", [True, False])
def test_search_answers_carry_the_service_and_handler_times(engine, fast_search):
    status, timings = _timings(create_app(with_config(engine, fast_search=fast_search)), body={"query": "头痛", "k": 3})
    assert status == 200 and set(timings) == {APP_TIMING, SEARCH_TIMING}
    # the handler runs inside the outermost layer, so its time is part of the service's
    assert 0 < timings[SEARCH_TIMING] <= timings[APP_TIMING]


def test_every_answer_carries_the_service_time_refusals_included(engine):
    status, timings = _timings(create_app(engine), path="/health")
    assert status == 200 and set(timings) == {APP_TIMING}
    status, timings = _timings(create_app(engine), body={"query": "   "})
    assert status == 422 and set(timings) == {APP_TIMING}  # no search ran: only the service's time


def test_server_timing_can_be_switched_off(engine):
    status, timings = _timings(create_app(with_config(engine, server_timing=False)), body={"query": "头痛"})
    assert status == 200 and timings == {}


@pytest.mark.parametrize(("values", "expected"), [
    (["app;dur=2.5"], {"app": 2.5}),
    (["search;dur=1.25, app;dur=3"], {"search": 1.25, "app": 3.0}),
    (["search;desc=\"handler\";dur=0.5", "app;dur=0.75"], {"search": 0.5, "app": 0.75}),
    (["cache;desc=hit", ""], {}),
])
def test_server_timing_values_are_parsed(values, expected):
    assert parse_server_timing(values) == expected


def _hang_up_mid_body(port: int, path: str) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: care\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n".encode() + b'{"query": "')


def test_a_client_that_hangs_up_mid_body_is_counted_apart_never_as_a_server_error(engine, caplog):
    import logging
    import time

    caplog.set_level(logging.INFO, logger="care.serve.metrics")
    with serve_in_thread(create_app(engine)) as url, httpx.Client(base_url=url, timeout=30) as client:
        port = int(url.rsplit(":", 1)[1])
        _hang_up_mid_body(port, "/search")
        _hang_up_mid_body(port, "/v1/embeddings")
        deadline = time.monotonic() + 10
        while 'care_client_disconnects_total{endpoint="/v1/embeddings"}' not in (text := client.get("/metrics").text):
            assert time.monotonic() < deadline, text
            time.sleep(0.05)
        assert client.post("/search", json={"query": "头痛"}).status_code == 200  # the service is fine
    assert 'care_client_disconnects_total{endpoint="/search"} 1.0' in text
    assert 'care_requests_total{endpoint="/search",status="499"} 1.0' in text
    assert 'status="5' not in text
    assert "the client hung up before the answer" in caplog.text
