"""One bad request must never hurt another: text checks at the edge, per-request failure isolation in
the batcher, the API key before the body, a body-size cap, bounded fields, readable 422s for broken
bodies, a clear error for a broken server config, and a short mixed load with hostile requests."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from care.errors import CareError
from care.serve.app import create_app
from care.serve.config import ServeConfig
from care.serve.server import serve_in_thread
from care.serve.validation import MAX_FILTER_VALUES, MAX_INSTRUCTION_CHARS
from care.testing.tiny_model import SAMPLE_QUERIES

from .engine_config import with_config

#: Seconds within which a refusal must arrive although the client has not sent its (huge) body.
PROMPT_S = 5.0


@pytest.fixture(scope="module")
def service(engine):
    with serve_in_thread(create_app(engine)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client


def _post_raw(client: httpx.Client, path: str, body: bytes) -> httpx.Response:
    return client.post(path, content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize(("path", "body", "message"), [
    ("/search", b'{"query": "\\u5934\\ud800"}', "query contains a lone surrogate (U+D800) at character 1"),
    ("/search", b'{"query": "\\u5934\\u75db", "instruction": "\\udc00"}', "instruction contains a lone surrogate"),
    ("/search", b'{"query": "a\\u0000b"}', "query contains a NUL character"),
    ("/search", b'{"query": "\\u200b\\u200b\\ufeff "}', "query has no visible characters"),
    ("/embed", b'{"inputs": ["\\u5934", "\\udfff"]}', "inputs[1] contains a lone surrogate"),
    ("/v1/embeddings", b'{"input": "\\u200d"}', "input has no visible characters"),
    ("/v1/embeddings", b'{"input": "x", "model": "care\\ud800"}', "model contains a lone surrogate"),
])
def test_text_the_model_cannot_take_is_422_at_the_edge(service, path, body, message):
    response = _post_raw(service, path, body)
    assert response.status_code == 422, response.text
    assert message in response.json()["detail"]


def test_a_request_that_fails_the_model_does_not_fail_its_batch(engine):
    original = engine.process

    def fragile(key, items):  # a model that raises on one input, whatever the edge let through
        if any("爆" in (item[0] if isinstance(item, tuple) else item) for item in items):
            raise RuntimeError("tokenizer exploded")
        return original(key, items)

    app = create_app(with_config(engine, max_wait_ms=100.0))
    batches: list[int] = []
    app.state.batcher._process = lambda key, items: (batches.append(len(items)), fragile(key, items))[1]
    with serve_in_thread(app) as url:
        def ask(query: str) -> int:
            return httpx.post(url + "/search", json={"query": query, "k": 2}, timeout=30).status_code

        queries = [*SAMPLE_QUERIES, "爆", *SAMPLE_QUERIES]
        with concurrent.futures.ThreadPoolExecutor(len(queries)) as pool:
            codes = list(pool.map(ask, queries))
        bad = httpx.post(url + "/search", json={"query": "爆"}, timeout=30)
    assert codes == [200] * len(SAMPLE_QUERIES) + [500] + [200] * len(SAMPLE_QUERIES)
    assert max(batches) > 1  # the bad query did share a batch with good ones
    assert "the encoder failed on this request" in bad.json()["detail"]


def _raw_request(url: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, float]:
    """Send a request by hand (so that a huge body can be announced and never sent); returns
    (status, seconds until the status line came back)."""
    host, port = url.removeprefix("http://").split(":")
    lines = ["POST /search HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    with socket.create_connection((host, int(port)), timeout=PROMPT_S) as sock:
        started = time.perf_counter()
        sock.sendall("\r\n".join(lines).encode() + body)
        reply = sock.recv(4096)
        return int(reply.split(b" ", 2)[1]), time.perf_counter() - started


def test_api_key_is_checked_before_the_body_and_big_bodies_are_413(engine, monkeypatch):
    monkeypatch.setenv("CARE_TEST_KEY", "s3cret")
    app = create_app(with_config(engine, api_key_env="CARE_TEST_KEY", max_body_bytes=1024))
    announced = {"Content-Type": "application/json", "Content-Length": str(100 * 1024 * 1024)}
    with serve_in_thread(app) as url:
        # 100 MB announced, not one byte sent: the answer comes from the headers alone
        status, seconds = _raw_request(url, announced)
        assert status == 401 and seconds < PROMPT_S
        status, seconds = _raw_request(url, {**announced, "Authorization": "Bearer s3cret"})
        assert status == 413 and seconds < PROMPT_S
        key = {"Authorization": "Bearer s3cret"}

        def chunks():  # no Content-Length: cut off as soon as the limit is passed
            for _ in range(64):
                yield b"x" * 256

        response = httpx.post(url + "/search", content=chunks(), headers=key)
        assert response.status_code == 413 and "at most 1024" in response.json()["detail"]
        ok = httpx.post(url + "/search", json={"query": "头痛"}, headers=key)
        assert ok.status_code == 200


@pytest.mark.parametrize(("body", "message"), [
    ({"query": "头痛", "instruction": "x" * (MAX_INSTRUCTION_CHARS + 1)},
     f"instruction has {MAX_INSTRUCTION_CHARS + 1} characters; at most {MAX_INSTRUCTION_CHARS}"),
    ({"query": "头痛", "filters": {"department": ["d"] * (MAX_FILTER_VALUES + 1)}}, f"at most {MAX_FILTER_VALUES}"),
    ({"query": "头痛", "filters": {f"f{i}": "x" for i in range(100)}}, "filters has 100 fields"),
    ({"query": "头痛", "filters": {"department": "x" * 1000}}, "has 1000 characters"),
])
def test_every_field_is_bounded(service, body, message):
    response = service.post("/search", json=body)
    assert response.status_code == 422 and message in response.json()["detail"]


def test_openai_fields_are_bounded(service):
    response = service.post("/v1/embeddings", json={"input": "头痛", "model": "m" * 5000})
    assert response.status_code == 422 and "model" in response.json()["detail"]


@pytest.mark.parametrize(("body", "message"), [
    (b'{"query": "' + "高血压".encode("gb18030") + b'"}', "the request body is not valid UTF-8: byte 11 (0xb8"),
    (b'{"query": "\xe5\xa4', "not valid UTF-8"),
    (b'{"query": "headache", "k": ', "the JSON body ends too early (after 27 bytes"),
    (b'{"query": "headache" "k": 3}', "the request body is not valid JSON: Expecting ',' delimiter at line 1, column 22"),
])
def test_broken_bodies_get_a_readable_422(service, body, message):
    response = _post_raw(service, "/search", body)
    assert response.status_code == 422
    assert message in response.json()["detail"]


def test_malformed_serve_config_is_a_clear_error(tmp_path, flat_index):
    bad = tmp_path / "serve.json"
    bad.write_text('{"max_k": 50,\n "max_query_chars": }', encoding="utf-8")
    with pytest.raises(CareError, match=r"serve.json: not valid JSON at line 2, column 21"):
        ServeConfig.load(bad)
    bad.write_text('{"max_k": "fifty"}', encoding="utf-8")
    with pytest.raises(CareError, match=r"serve.json, field 'max_k': expected an integer, got 'fifty'"):
        ServeConfig.load(bad)
    bad.write_text('{"max_kk": 5}', encoding="utf-8")
    with pytest.raises(CareError, match=r"serve.json: unknown serve option\(s\) \['max_kk'\]"):
        ServeConfig.load(bad)
    bad.write_text('{"max_k": 50,\n "max_query_chars": }', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "care.cli", "serve", "--index", str(flat_index), "--config", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("error: ") and "line 2, column 21" in done.stderr


def test_short_mixed_load_with_hostile_requests_fails_no_valid_request(engine, monkeypatch):
    from care.serve.loadgen import run_mixed_load

    monkeypatch.setenv("CARE_TEST_KEY", "s3cret")
    app = create_app(with_config(engine, api_key_env="CARE_TEST_KEY"))
    with serve_in_thread(app) as url:
        report = run_mixed_load(url, list(SAMPLE_QUERIES), clients=8, duration_s=3.0, hostile_share=0.3, seed=1,
                                api_key="s3cret",
                                kinds_wanted=["lone_surrogate", "lone_surrogate_embed", "nul", "bad_utf8",
                                              "truncated_json", "huge_instruction"])
    assert report.valid_requests > 8 and report.hostile_requests > 0
    assert report.valid_failures == 0 and report.hostile_server_errors == 0, json.dumps(report.to_dict())
    for kind, counts in report.status.items():
        assert set(counts) == ({"200"} if kind.startswith("valid_") else {"422"}), (kind, counts)
