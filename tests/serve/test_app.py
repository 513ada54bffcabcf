"""The HTTP service end to end on a real uvicorn server (loopback): endpoints, limits, auth, batching, load."""

from __future__ import annotations

import concurrent.futures
import json
import shutil

import httpx
import numpy as np
import pytest

from care.errors import CareError
from care.serve.app import create_app
from care.serve.config import ServeConfig
from care.serve.engine import load_engine
from care.serve.server import serve_in_thread
from care.testing.tiny_model import SAMPLE_DOCS, SAMPLE_QUERIES

from .engine_config import with_config


@pytest.fixture(scope="module")
def service(engine):
    with serve_in_thread(create_app(engine)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client


def test_search_returns_documents_ranked_like_the_engine(service, engine):
    response = service.post("/search", json={"query": "头痛怎么办", "k": 3})
    assert response.status_code == 200
    body = response.json()
    assert body["k"] == 3 and len(body["hits"]) == 3
    vector = engine.query_encoder.encode_queries(["头痛怎么办"], instruction=engine.default_instruction)
    scores, rows = engine.bundle.index.search(vector, 3)
    expected = [SAMPLE_DOCS[r]["id"] for r in rows[0]]
    assert [h["id"] for h in body["hits"]] == expected
    assert np.allclose([h["score"] for h in body["hits"]], scores[0], atol=1e-5)
    first = next(d for d in SAMPLE_DOCS if d["id"] == expected[0])
    assert body["hits"][0]["text"] == first["text"] and body["hits"][0]["metadata"] == {"department": first["department"]}
    # the body is written directly (orjson), not through response_model: it must still be the documented schema
    from care.serve.schemas import SearchResponse

    assert SearchResponse.model_validate_json(response.content).model_dump() == body
    assert response.headers["content-type"] == "application/json"


def test_filters_keep_only_matching_metadata(service):
    hits = service.post("/search", json={"query": "胸痛", "k": 5, "filters": {"department": "cardiology"}}).json()["hits"]
    assert {h["id"] for h in hits} == {"d2", "d7"}
    hits = service.post("/search", json={"query": "胸痛", "k": 5, "filters": {"department": ["cardiology", "neurology"]}}).json()["hits"]
    assert {h["id"] for h in hits} == {"d1", "d2", "d7", "d8"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": "   "}, "query is empty"),
        ({"query": "头" * 3000}, "at most 2048"),
        ({"query": "头痛", "k": 0}, "k: Input should be greater than or equal to 1"),
        ({"query": "头痛", "k": 101}, "larger than the maximum 100"),
        ({"query": "头痛", "unknown": 1}, "unknown: Extra inputs are not permitted"),
        ({"k": 3}, "query: Field required"),
    ],
)
def test_bad_search_input_is_422_with_a_clear_message(service, body, message):
    response = service.post("/search", json=body)
    assert response.status_code == 422
    assert message in response.json()["detail"]


def test_malformed_json_is_4xx(service):
    response = service.post("/search", content=b'{"query": ', headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON" in response.json()["detail"]


def test_embed_matches_the_query_encoder_and_refuses_an_unloaded_document_side(service, engine):
    body = service.post("/embed", json={"inputs": ["头痛", "高血压"]}).json()
    expected = engine.query_encoder.encode_queries(["头痛", "高血压"], instruction=engine.default_instruction)
    assert body["dim"] == engine.dim and np.allclose(body["embeddings"], expected, atol=1e-5)
    response = service.post("/embed", json={"inputs": "头痛", "side": "document"})
    assert response.status_code == 400 and "--document-model" in response.json()["detail"]
    assert service.post("/embed", json={"inputs": []}).status_code == 422


def test_openai_client_and_care_openai_encoder_use_the_service(service, engine):
    from openai import OpenAI

    from care.encoders.openai_api import OpenAIEncoder, OpenAIEncoderConfig
    from care.serve.engine import encode_raw_queries

    client = OpenAI(base_url=str(service.base_url) + "/v1", api_key="unused")
    result = client.embeddings.create(model="care", input=["头痛", "发热"])
    raw = encode_raw_queries(engine.query_encoder, ["头痛", "发热"])
    assert np.allclose([d.embedding for d in result.data], raw, atol=1e-5)
    assert result.usage.total_tokens == 4
    short = client.embeddings.create(model="care", input="头痛", dimensions=16, encoding_format="float")
    assert len(short.data[0].embedding) == 16 and np.isclose(np.linalg.norm(short.data[0].embedding), 1, atol=1e-5)
    # care's own OpenAI-compatible encoder (what 'care bench openai:...' uses) formats the instruction itself
    encoder = OpenAIEncoder(OpenAIEncoderConfig(model="care", base_url=str(service.base_url) + "/v1", api_key_env="CARE_TEST_NO_KEY"))
    vectors = encoder.encode_queries(["头痛"], instruction="Find answers")
    local = engine.query_encoder.encode_queries(["头痛"], instruction="Find answers")
    assert np.allclose(vectors, local, atol=1e-5)


def test_health_metrics_openapi_and_page(service, engine):
    health = service.get("/health").json()
    assert health["status"] == "ok" and health["documents"] == len(SAMPLE_DOCS) and health["model_matches_index"]
    assert health["index_model"] == engine.bundle.manifest.model  # with query_encoder: which towers answer
    service.post("/search", json={"query": "头痛"})
    metrics = service.get("/metrics").text
    assert 'care_requests_total{endpoint="/search",status="200"}' in metrics and "care_batch_size_bucket" in metrics
    schema = service.get("/openapi.json").json()
    assert {"/search", "/embed", "/v1/embeddings", "/health"} <= set(schema["paths"])
    page = service.get("/")
    assert page.status_code == 200 and "search-form" in page.text
    assert service.get("/static/app.js").status_code == 200


def test_concurrent_requests_are_micro_batched(engine):
    calls: list[int] = []
    original = engine.process

    def counting(key, items):
        calls.append(len(items))
        return original(key, items)

    app = create_app(with_config(engine, max_wait_ms=50.0))
    app.state.batcher._process = counting
    with serve_in_thread(app) as url:
        def ask(i: int) -> int:
            return httpx.post(url + "/search", json={"query": SAMPLE_QUERIES[i % len(SAMPLE_QUERIES)], "k": 2}, timeout=30).status_code

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(ask, range(16)))
    assert codes == [200] * 16
    assert sum(calls) == 16 and len(calls) < 16 and max(calls) > 1


def test_an_idle_service_answers_query_work_inline_and_the_same_as_through_the_batcher(engine):
    answers = {}
    for limit in (4, 0):  # 0 = always through the batcher's worker thread
        app = create_app(with_config(engine, inline_max_items=limit))
        with serve_in_thread(app) as url:
            hits = httpx.post(url + "/search", json={"query": "头痛怎么办", "k": 3}, timeout=30).json()["hits"]
            vectors = httpx.post(url + "/embed", json={"inputs": ["头痛", "发热"]}, timeout=30).json()["embeddings"]
            big = httpx.post(url + "/embed", json={"inputs": ["头痛"] * 5}, timeout=30).status_code
        answers[limit] = (hits, vectors, big, app.state.batcher.inline_calls)
    assert answers[4][3] == 2 and answers[0][3] == 0  # 5 texts > 4: the worker thread
    assert answers[4][2] == answers[0][2] == 200
    assert [h["id"] for h in answers[4][0]] == [h["id"] for h in answers[0][0]]
    assert np.allclose(answers[4][1], answers[0][1], atol=1e-6)


def test_inline_work_is_only_small_query_side_work():
    from care.serve.app import cheap_enough_inline
    from care.serve.engine import EMBED, SEARCH

    assert cheap_enough_inline((SEARCH, None), [("q", 10)], 4)
    assert cheap_enough_inline((EMBED, "query", None, False), ["a", "b"], 4)
    assert not cheap_enough_inline((EMBED, "query", None, False), ["a"] * 5, 4)
    assert not cheap_enough_inline((EMBED, "document", None, False), ["a"], 4)
    assert not cheap_enough_inline((SEARCH, None), [("q", 10)], 0)
    with pytest.raises(CareError, match="inline_max_items must be >= 0"):
        ServeConfig(inline_max_items=-1)


def test_short_load_run_has_no_5xx_and_no_dropped_requests(service):
    from care.serve.loadgen import run_load

    report = run_load(str(service.base_url), list(SAMPLE_QUERIES), clients=16, duration_s=2.0, k=5)
    assert report.requests > 16 and report.dropped == 0 and report.server_errors == 0
    assert report.status == {"200": report.requests}
    assert report.p50_ms <= report.p99_ms


def test_api_key_is_required_when_configured(engine, monkeypatch):
    monkeypatch.setenv("CARE_TEST_KEY", "s3cret")
    keyed = create_app(with_config(engine, api_key_env="CARE_TEST_KEY"))
    with serve_in_thread(keyed) as url:
        assert httpx.post(url + "/search", json={"query": "头痛"}).status_code == 401
        assert httpx.post(url + "/search", json={"query": "头痛"}, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.post(url + "/search", json={"query": "头痛"}, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.post(url + "/embed", json={"inputs": "头痛"}, headers={"X-API-Key": "s3cret"}).status_code == 200
        assert httpx.get(url + "/health").status_code == 200
    monkeypatch.delenv("CARE_TEST_KEY")
    with pytest.raises(CareError, match="CARE_TEST_KEY is not set"):
        create_app(with_config(engine, api_key_env="CARE_TEST_KEY"))


def test_document_side_when_loaded_explicitly(flat_index, tiny_care):
    engine = load_engine(flat_index, document_model=str(tiny_care))
    with serve_in_thread(create_app(engine)) as url:
        body = httpx.post(url + "/embed", json={"inputs": [SAMPLE_DOCS[0]["title"] + " " + SAMPLE_DOCS[0]["text"]], "side": "document"}).json()
        openai_body = httpx.post(url + "/v1/embeddings", json={"input": "头痛", "model": "care:document"}).json()
    stored = np.load(next((flat_index / "shards").glob("*.npy")))[0].astype(np.float32)
    assert np.allclose(body["embeddings"][0], stored, atol=2e-3)  # float16 storage
    assert len(openai_body["data"][0]["embedding"]) == engine.dim


def test_start_up_fails_clearly_on_missing_or_corrupt_index(flat_index, tmp_path):
    with pytest.raises(CareError, match="does not exist"):
        load_engine(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    shutil.copytree(flat_index, broken)
    (broken / "index" / "index.faiss").write_bytes(b"not a faiss index")
    with pytest.raises(CareError, match="corrupt or truncated"):
        load_engine(broken)
    shutil.copytree(flat_index, tmp_path / "nomanifest")
    (tmp_path / "nomanifest" / "manifest.json").unlink()
    with pytest.raises(CareError, match="incomplete"):
        load_engine(tmp_path / "nomanifest")
    shutil.copytree(flat_index, tmp_path / "badjson")
    (tmp_path / "badjson" / "manifest.json").write_text("{", encoding="utf-8")
    with pytest.raises(CareError, match="corrupt JSON"):
        load_engine(tmp_path / "badjson")
    shutil.copytree(flat_index, tmp_path / "nostore")
    (tmp_path / "nostore" / "docstore.sqlite").unlink()
    with pytest.raises(CareError, match=r"docstore\.sqlite is missing .*care index build --merge"):
        load_engine(tmp_path / "nostore")
    with pytest.raises(CareError, match="document store .* is missing"):  # without the manifest's checksums
        load_engine(tmp_path / "nostore", verify="off")


def test_start_up_rejects_a_query_encoder_of_another_width(flat_index, tmp_path):
    from care.index.manifest import IndexManifest

    manifest = json.loads((flat_index / "manifest.json").read_text())
    other = tmp_path / "other"
    shutil.copytree(flat_index, other)
    IndexManifest.from_dict({**manifest, "model": "e5"}).save(other)
    from care.errors import DimensionMismatchError

    with pytest.raises(DimensionMismatchError, match="384-d vectors but the index"):
        load_engine(other)


def test_v1_models_lists_the_served_sides_and_an_unknown_model_is_404(service):
    from openai import NotFoundError, OpenAI

    listing = service.get("/v1/models").json()
    assert listing["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in listing["data"]] == [("care", "model", "care")]
    assert isinstance(listing["data"][0]["created"], int)
    client = OpenAI(base_url=str(service.base_url) + "/v1", api_key="unused")
    assert [m.id for m in client.models.list()] == ["care"] and client.models.retrieve("care").id == "care"
    response = service.post("/v1/embeddings", json={"input": "头痛", "model": "text-embedding-3-small"})
    assert response.status_code == 404 and "['care']" in response.json()["detail"]
    assert service.get("/v1/models/text-embedding-3-small").status_code == 404
    with pytest.raises(NotFoundError):
        client.embeddings.create(model="text-embedding-3-small", input="头痛")
    # the document side is not loaded here, so its name is not served either
    assert service.post("/v1/embeddings", json={"input": "头痛", "model": "care:document"}).status_code == 404
    # no model: the query side, reported under its served name
    assert service.post("/v1/embeddings", json={"input": "头痛"}).json()["model"] == "care"


def test_v1_models_lists_the_document_side_when_loaded(flat_index, tiny_care):
    engine = load_engine(flat_index, document_model=str(tiny_care), config=ServeConfig(model_name="tiny"))
    with serve_in_thread(create_app(engine)) as url:
        ids = [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]]
        answer = httpx.post(url + "/v1/embeddings", json={"input": "头痛", "model": "tiny:document"}).json()
    assert ids == ["tiny", "tiny:document"] and answer["model"] == "tiny:document"


@pytest.mark.parametrize("path", ["/search", "/embed", "/v1/embeddings"])
def test_every_json_endpoint_refuses_a_body_that_is_not_declared_json_alike(service, path):
    body = {"/search": {"query": "头痛"}, "/embed": {"inputs": "头痛"}, "/v1/embeddings": {"input": "头痛"}}[path]
    raw = json.dumps(body).encode()
    response = service.post(path, content=raw, headers={"content-type": "text/plain"})
    assert response.status_code == 415 and "application/json" in response.json()["detail"]
    for declared in ("application/json; charset=utf-8", "application/vnd.care+json"):
        assert service.post(path, content=raw, headers={"content-type": declared}).status_code == 200
    assert service.post(path, content=raw).status_code == 200  # no Content-Type: read as JSON (FastAPI's rule)


def test_cors_is_same_origin_by_default_and_allows_the_listed_origins(engine):
    origin = "https://app.example.org"
    preflight = {"origin": origin, "access-control-request-method": "POST",
                 "access-control-request-headers": "content-type,authorization"}
    with serve_in_thread(create_app(engine)) as url:
        answer = httpx.post(url + "/search", json={"query": "头痛"}, headers={"origin": origin})
        assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers
    for fast_search in (True, False):
        app = create_app(with_config(engine, cors_origins=(origin,), fast_search=fast_search, api_key_env=None))
        with serve_in_thread(app) as url:
            options = httpx.options(url + "/search", headers=preflight)
            assert options.status_code == 200 and options.headers["access-control-allow-origin"] == origin
            assert "authorization" in options.headers["access-control-allow-headers"].lower()
            answer = httpx.post(url + "/search", json={"query": "头痛"}, headers={"origin": origin})
            assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == origin
            assert "server-timing" in answer.headers["access-control-expose-headers"].lower()
            other = httpx.options(url + "/search", headers={**preflight, "origin": "https://evil.example"})
            assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


def test_cors_preflight_needs_no_api_key(engine, monkeypatch):
    monkeypatch.setenv("CARE_TEST_KEY", "s3cret")
    origin = "http://localhost:3000"
    app = create_app(with_config(engine, cors_origins=(origin,), api_key_env="CARE_TEST_KEY"))
    with serve_in_thread(app) as url:
        options = httpx.options(url + "/search", headers={"origin": origin, "access-control-request-method": "POST",
                                                          "access-control-request-headers": "authorization"})
        refused = httpx.post(url + "/search", json={"query": "头痛"}, headers={"origin": origin})
    assert options.status_code == 200
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == origin  # readable


def test_cors_origins_are_checked():
    with pytest.raises(CareError, match="is not an origin"):
        ServeConfig(cors_origins=("app.example.org",))
    with pytest.raises(CareError, match="is not an origin"):
        ServeConfig(cors_origins=("https://app.example.org/",))
    assert ServeConfig.from_dict({"cors_origins": ["https://a.org", "*"]}).cors_origins == ("https://a.org", "*")
def test_care_serve_passes_its_verify_level_to_the_engine_and_refuses_an_unknown_one(flat_index, monkeypatch):
    from typer.testing import CliRunner

    import care.serve.engine
    from care.cli import app

    seen = {}

    def fake_load_engine(index, model, **kwargs):
        seen.update(kwargs)
        raise CareError("stop before serving")

    monkeypatch.setattr(care.serve.engine, "load_engine", fake_load_engine)
    for args, level in (([], "full"), (["--verify", "quick"], "quick"), (["--verify", "off"], "off")):
        result = CliRunner().invoke(app, ["serve", "--index", str(flat_index), *args])
        assert isinstance(result.exception, CareError) and seen["verify"] == level
    monkeypatch.undo()
    result = CliRunner().invoke(app, ["serve", "--index", str(flat_index), "--verify", "fast"])
    assert "--verify 'fast': choose one of full, quick, off" in str(result.exception)


def test_an_intact_index_serves_the_same_hits_at_every_verify_level(flat_index, engine):
    from care.index.integrity import VERIFY_MODES

    query = SAMPLE_QUERIES[0]
    expected = engine.hits(engine.search_vectors([query], [5], instruction=None)[0], 5, None)
    for level in VERIFY_MODES:
        other = load_engine(flat_index, verify=level)
        assert other.hits(other.search_vectors([query], [5], instruction=None)[0], 5, None) == expected
