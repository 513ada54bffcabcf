"""Slow clients against a real uvicorn server: request heads and bodies sent a byte at a time are cut off
at their deadline (408, connection closed) while normal queries are answered; idle connections close."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from care.serve.app import create_app
from care.serve.server import serve_in_thread
from care.serve.slow_clients import BODY, HEADERS, SlowClients
from care.testing.tiny_model import SAMPLE_QUERIES

from .engine_config import with_config

TIMEOUT_S = 1.0
#: What a closed socket may take beyond its deadline on a loaded 2-core machine.
SLACK_S = 1.5
N_SLOW = 60


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_sixty_slow_sockets_are_closed_at_their_deadline_and_normal_queries_go_on(engine):
    app = create_app(with_config(engine, header_timeout_s=TIMEOUT_S, body_timeout_s=TIMEOUT_S))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        with SlowClients(url, n=N_SLOW, duration_s=TIMEOUT_S + 2 * SLACK_S, interval_s=0.2) as slow:
            codes = []
            while slow.running():
                codes.append(client.post("/search", json={"query": SAMPLE_QUERIES[len(codes) % 4], "k": 3}).status_code)
        results = slow.join()
        metrics = client.get("/metrics").text
    assert len(codes) > 5 and set(codes) == {200}
    assert len(results) == N_SLOW and {r.kind for r in results} == {HEADERS, BODY}
    late = [r for r in results if r.closed_after_s is None or r.closed_after_s > TIMEOUT_S + SLACK_S]
    assert not late, late
    assert all(r.closed_after_s >= TIMEOUT_S * 0.9 for r in results)  # not before the deadline
    assert {r.answer for r in results} == {"HTTP/1.1 408 Request Timeout"}
    assert _metric(metrics, 'care_client_timeouts_total{phase="headers"}') == N_SLOW / 2
    assert _metric(metrics, 'care_client_timeouts_total{phase="body"}') == N_SLOW / 2
    assert 'status="408"' in metrics and 'status="5' not in metrics


def test_a_connection_that_sends_nothing_is_closed_silently_and_a_kept_alive_one_after_its_idle_timeout(engine):
    app = create_app(with_config(engine, header_timeout_s=TIMEOUT_S, keep_alive_timeout_s=0.5))
    with serve_in_thread(app) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as silent:
            started = time.monotonic()
            assert silent.recv(100) == b""  # closed without an answer
            assert TIMEOUT_S * 0.9 <= time.monotonic() - started <= TIMEOUT_S + SLACK_S
        with socket.create_connection(("127.0.0.1", port), timeout=5) as kept:
            kept.sendall(b"GET /health HTTP/1.1\r\nHost: care\r\n\r\n")
            assert kept.recv(65536).startswith(b"HTTP/1.1 200")
            started = time.monotonic()
            assert kept.recv(100) == b""
            assert time.monotonic() - started <= 0.5 + SLACK_S


def test_a_request_sent_whole_on_a_kept_alive_connection_is_not_cut_off(engine):
    app = create_app(with_config(engine, header_timeout_s=TIMEOUT_S, keep_alive_timeout_s=5.0))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(2):  # one connection, each request after a pause longer than the head's deadline
            assert client.get("/health").status_code == 200
            time.sleep(TIMEOUT_S * 1.2)


def test_the_connection_limit_answers_503_once_reached(engine):
    app = create_app(with_config(engine, max_connections=4))
    with serve_in_thread(app) as url:
        port = int(url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            time.sleep(0.2)
            assert httpx.get(url + "/health", timeout=10).status_code == 503
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.2)
        assert httpx.get(url + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("port", [-1, 65536, 99999])
def test_a_port_out_of_range_is_refused(port):
    from care.errors import CareError
    from care.serve.server import bind_socket

    with pytest.raises(CareError, match="1..65535"):
        bind_socket("127.0.0.1", port)


def test_port_zero_binds_a_free_port_and_a_port_in_use_is_refused():
    from care.errors import CareError
    from care.serve.server import bind_socket, bound_url

    sock = bind_socket("127.0.0.1", 0)
    try:
        sock.listen()
        port = sock.getsockname()[1]
        assert port > 0 and bound_url(sock) == f"http://127.0.0.1:{port}"
        with pytest.raises(CareError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind_socket("127.0.0.1", port)
    finally:
        sock.close()


@pytest.mark.parametrize("field", ["header_timeout_s", "body_timeout_s", "keep_alive_timeout_s"])
def test_a_deadline_must_be_positive(field):
    from care.errors import CareError
    from care.serve.config import ServeConfig

    with pytest.raises(CareError, match=f"{field} must be > 0"):
        ServeConfig(**{field: 0})
