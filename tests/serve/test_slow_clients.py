"""The slow-client generator: its outcomes, in a thread or a process of its own (what the benchmark uses).
Its work against a real server is tested in ``test_protocol.py``."""

from __future__ import annotations

import socket

import pytest

from care.serve.slow_clients import BODY, HEADERS, SlowClients


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once closed


@pytest.mark.parametrize("process", [False, True])
def test_a_refused_socket_is_reported_closed_at_once(process):
    with SlowClients(f"http://127.0.0.1:{_closed_port()}", n=4, duration_s=1.0, process=process) as slow:
        pass
    results = slow.join()
    assert sorted(r.kind for r in results) == [BODY, BODY, HEADERS, HEADERS]
    assert all(r.closed_after_s == 0.0 and r.answer.startswith("no connection") for r in results)


def test_a_socket_the_server_never_closes_is_reported_open_with_what_it_sent():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with SlowClients(f"http://127.0.0.1:{port}", n=1, duration_s=0.5, interval_s=0.1, kinds=(HEADERS,)) as slow:
            pass
    (result,) = slow.join()
    assert result.closed_after_s is None and 0.4 <= result.open_s <= 2.0 and result.answer is None
    assert 3 <= result.bytes_sent <= 8  # one byte now, then one every 0.1 s
