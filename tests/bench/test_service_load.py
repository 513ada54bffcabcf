"""``benchmarks/service_load.py``'s reading of the service's ``Server-Timing`` header (its clients,
``service_load_clients.py``) and the report's lines on it (``service_load_report.py``)."""

from __future__ import annotations

from benchmarks import service_load_clients, service_load_report


def test_server_timing_p50_takes_each_metrics_median():
    headers = ["search;dur=2, app;dur=3", "search;dur=4, app;dur=5", "search;dur=3, app;dur=4.5", ""]
    assert service_load_clients.server_timing_p50(headers) == {"search": 3.0, "app": 4.5}
    assert service_load_clients.server_timing_p50([]) == {}


def test_the_split_subtracts_the_service_view_from_the_clients():
    overhead = {"bare_p50_ms": 3.0, "http_p50_ms": 4.0,
                "warm_blocks_p50_ms": {"bare": 2.5, "http": 3.5, "floor": 0.2},
                "server_timing_p50_ms": {"warm": {"search": 2.75, "app": 3.0}, "interleaved": {"app": 3.5}}}
    (blank, line) = service_load_report._server_timing_lines(overhead)  # interleaved lacks "search": no line for it
    assert blank == "" and "Inside the service (warm" in line
    assert "2.750 ms against the bare loop's 2.500 ms" in line and "(+0.250 ms)" in line
    assert "(guard, metrics, body parsing, answer) 0.250 ms" in line and "the client) 0.500 ms" in line
    assert service_load_report._server_timing_lines({"bare_p50_ms": 3.0, "http_p50_ms": 4.0}) == []


def test_the_thin_service_line_compares_care_serve_with_it():
    overhead = {"thin_p50_ms": 4.4, "thin_overhead_p50": 0.1, "over_thin_p50": 0.05, "warm_blocks_over_thin_p50": 0.04,
                "warm_blocks_p50_ms": {"bare": 3.0, "thin": 3.6, "http": 3.744, "floor": 0.2}}
    (line, blank) = service_load_report._thin_lines(overhead)
    assert blank == "" and "thin p50 4.400 ms interleaved (+10.0 % over the bare loop" in line
    assert "`care serve` +5.0 % over thin" in line and "thin 3.600 ms (+20.0 % over bare)" in line
    assert "+4.0 % over thin" in line
    assert service_load_report._thin_lines({"over_thin_p50": None}) == []
