"""OpenAIEncoder against a tiny OpenAI-compatible server on 127.0.0.1 (no network)."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

pytest.importorskip("openai")

from care.encoders.openai_api import OpenAIEncoder, OpenAIEncoderConfig  # noqa: E402
from care.encoders.registry import load_model  # noqa: E402
from care.errors import CareError  # noqa: E402

DIM = 8


def fake_vector(text: str) -> list[float]:
    """Deterministic, deliberately un-normalised vector for a text."""
    raw = hashlib.sha256(text.encode("utf-8")).digest()[:DIM]
    return [float(byte) + 1.0 for byte in raw]


class FakeEmbeddings(BaseHTTPRequestHandler):
    """POST /v1/embeddings; answers rows in reverse order (clients must sort by index)."""

    script: list[int] = []  # status codes to return before succeeding
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if type(self).script:
            status = type(self).script.pop(0)
            self._reply(status, {"error": {"message": f"status {status}", "type": "test"}}, {"retry-after-ms": "1"})
            return
        inputs = body["input"]
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(inputs)]
        self._reply(200, {"object": "list", "model": body["model"], "data": data[::-1],
                          "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    def _reply(self, status, payload, headers=None):
        blob = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(blob)

    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture()
def server():
    FakeEmbeddings.script, FakeEmbeddings.requests = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeEmbeddings)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _unit(texts):
    rows = np.array([fake_vector(t) for t in texts], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_batches_order_and_normalisation(server, monkeypatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test")
    encoder = load_model(f"openai:tiny-embed?base_url={server}&api_key_env=TEST_EMBED_KEY&batch_size=2")
    texts = ["头痛", "发热", "咳嗽", "感冒", "高血压"]
    vectors = encoder.encode_documents(texts)
    np.testing.assert_allclose(vectors, _unit(texts), atol=1e-6)
    assert vectors.dtype == np.float32
    sizes = [len(r["body"]["input"]) for r in FakeEmbeddings.requests]
    assert sizes == [2, 2, 1]
    assert all(r["path"] == "/v1/embeddings" and r["auth"] == "Bearer sk-test" for r in FakeEmbeddings.requests)
    assert FakeEmbeddings.requests[0]["body"]["encoding_format"] == "float"


def test_429_then_success_is_retried(server):
    FakeEmbeddings.script = [429, 503]
    encoder = OpenAIEncoder(OpenAIEncoderConfig(model="tiny-embed", base_url=server, max_retries=3))
    vectors = encoder.encode_queries(["头痛怎么办"], instruction="检索")
    np.testing.assert_allclose(vectors, _unit(["Instruct: 检索\nQuery: 头痛怎么办"]), atol=1e-6)
    assert len(FakeEmbeddings.requests) == 3


def test_exhausted_retries_and_client_errors_become_care_errors(server):
    FakeEmbeddings.script = [429, 429, 429]
    encoder = OpenAIEncoder(OpenAIEncoderConfig(model="tiny-embed", base_url=server, max_retries=1, dimensions=DIM))
    with pytest.raises(CareError, match="failed after up to 1 retries"):
        encoder.encode_documents(["x"])
    FakeEmbeddings.script = [400]
    with pytest.raises(CareError, match="tiny-embed"):
        encoder.encode_documents(["x"])


def test_dim_probe_prefixes_env_base_url_and_fingerprint(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    encoder = load_model("openai:tiny-embed?query_prefix=query:+&document_prefix=passage:+")
    assert encoder.dim == DIM and len(FakeEmbeddings.requests) == 1
    np.testing.assert_allclose(encoder.encode_queries(["a"]), _unit(["query: a"]), atol=1e-6)
    np.testing.assert_allclose(encoder.encode_documents(["a"]), _unit(["passage: a"]), atol=1e-6)
    assert encoder.encode_documents([]).shape == (0, DIM)
    assert encoder.fingerprint != load_model("openai:other-model").fingerprint


def test_official_api_without_a_key_is_refused(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(CareError, match="OPENAI_API_KEY is not set"):
        load_model("openai:text-embedding-3-small")
