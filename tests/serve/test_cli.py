"""``care serve``'s command line: the port is checked, bound before the model loads, and printed as bound."""

from __future__ import annotations

import re
import socket

from typer.testing import CliRunner

from care.cli import app
from care.errors import CareError


def _flat(output: str) -> str:
    return " ".join(output.replace("│", " ").split())  # typer's error box wraps and frames the message


def test_a_port_out_of_range_stops_care_serve_with_the_range(flat_index):
    result = CliRunner().invoke(app, ["serve", "--index", str(flat_index), "--port", "99999"])
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in _flat(result.output) and "65535" in _flat(result.output)


def test_port_zero_serves_on_the_free_port_it_prints(flat_index, monkeypatch):
    import care.serve.server

    served = {}
    monkeypatch.setattr(care.serve.server, "run_foreground", lambda app, sock, **_: served.update(sock=sock))
    result = CliRunner().invoke(app, ["serve", "--index", str(flat_index), "--port", "0"])
    assert result.exit_code == 0, result.output
    found = re.search(r"on http://127\.0\.0\.1:(\d+) ", result.output)
    try:
        assert found and int(found.group(1)) == served["sock"].getsockname()[1] > 0
    finally:
        served["sock"].close()


def test_a_port_in_use_stops_care_serve_before_the_model_loads(flat_index, monkeypatch):
    import care.serve.engine

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded although the port is in use")

    monkeypatch.setattr(care.serve.engine, "load_engine", no_loading)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--index", str(flat_index), "--port", str(port)])
    assert isinstance(result.exception, CareError)
    assert f"cannot listen on 127.0.0.1:{port}" in str(result.exception) and "--port" in str(result.exception)
