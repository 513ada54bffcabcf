"""The lean /search hot path (issue 59): a body of the common shape is checked by hand and parsed once, and it
answers exactly what the pydantic path (``lean_search=False``) and FastAPI's route (``fast_search=False``) answer —
every refusal word for word, every accepted query with the bare engine's hits."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from care.serve.app import create_app
from care.serve.config import ServeConfig
from care.serve.search_path import SearchQuery, lean_request
from care.serve.server import build_server, serve_in_thread

from .engine_config import with_config

#: Bodies each path must answer alike: bad JSON, missing or mistyped fields, k out of range, shapes the lean check
#: leaves to the model (coercible strings, floats, booleans, filters), and good ones.
BODIES = [
    b'{"query": ',  # cut off
    b'{"query": "a" "b"}',  # not JSON
    b"NaN",  # JSON the stdlib reads, orjson does not
    b'{"query": NaN}',
    b"null",
    b"{}",
    b'{"k": 3}',
    b'{"query": 5}',
    b'{"query": null}',
    b'{"query": ["a"]}',
    b'{"query": "\\u5934\\u75db", "k": 0}',
    b'{"query": "\\u5934\\u75db", "k": -3}',
    b'{"query": "\\u5934\\u75db", "k": 101}',
    b'{"query": "\\u5934\\u75db", "k": "three"}',
    b'{"query": "\\u5934\\u75db", "k": "3"}',
    b'{"query": "\\u5934\\u75db", "k": 2.0}',
    b'{"query": "\\u5934\\u75db", "k": 2.5}',
    b'{"query": "\\u5934\\u75db", "k": true}',
    b'{"query": "\\u5934\\u75db", "k": 99999999999999999999999}',
    b'{"query": "\\u5934\\u75db", "filters": "cardiology"}',
    b'{"query": "\\u5934\\u75db", "filters": {"department": "cardiology"}}',
    b'{"query": "\\u5934\\u75db", "instruction": 7}',
    b'{"query": "\\u5934\\u75db", "instruction": "a\\u0000b"}',
    b'{"query": "\\u5934\\u75db", "instruction": "' + b"x" * 2000 + b'"}',
    b'{"query": "\\u5934\\u75db", "colour": "red"}',
    b'{"query": "   "}',
    b'{"query": "\\u200b"}',
    b'{"query": "a\\u0000"}',
    b'{"query": "\\ud800"}',
    b'{"query": "' + "头".encode() * 3000 + b'"}',
    b'{"query": "\\u5934\\u75db", "k": 3}',
    b'{"query": "\\u5934\\u75db", "k": null, "filters": null, "instruction": null}',
    b'{"query": "\\u80f8\\u75db", "instruction": "Find answers"}',
]


def _answers(app) -> list[tuple[int, object]]:
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        out = []
        for body in BODIES:
            response = client.post("/search", content=body, headers={"content-type": "application/json"})
            payload = response.json()
            if isinstance(payload, dict):
                payload.pop("took_ms", None)
            out.append((response.status_code, payload))
        return out


def test_lean_path_answers_every_body_like_the_pydantic_path_and_the_route(engine):
    lean = _answers(create_app(engine))
    before = _answers(create_app(with_config(engine, lean_search=False)))
    route = _answers(create_app(with_config(engine, fast_search=False)))
    assert lean == before
    # FastAPI's route words a non-object body its own way ("Input should be a valid dictionary ..."), and reads an
    # integer past 64 bits as one (the hot path's stdlib fallback hands the model a string): 422 either way
    worded_apart = (b"null", b"NaN", b'{"query": "\\u5934\\u75db", "k": 99999999999999999999999}')
    differs = [i for i, (a, b) in enumerate(zip(lean, route)) if a != b]
    assert all(BODIES[i] in worded_apart and lean[i][0] == route[i][0] == 422 for i in differs), differs
    assert [status for status, _ in lean][-3:] == [200, 200, 200]
    by_body = dict(zip(BODIES, lean))
    assert "ends too early" in by_body[b'{"query": '][1]["detail"]
    assert by_body[b'{"k": 3}'][1]["detail"] == "invalid request: query: Field required"
    assert "k: Input should be greater than or equal to 1" in by_body[b'{"query": "\\u5934\\u75db", "k": 0}'][1]["detail"]
    assert "larger than the maximum" in by_body[b'{"query": "\\u5934\\u75db", "k": 101}'][1]["detail"]
    assert "k: Input should be a valid integer" in by_body[b'{"query": "\\u5934\\u75db", "k": "three"}'][1]["detail"]
    assert "query: Input should be a valid string" in by_body[b'{"query": 5}'][1]["detail"]
    assert by_body[b'{"query": "\\u5934\\u75db", "k": "3"}'][0] == 200  # the model's coercion, kept


@pytest.mark.parametrize(("payload", "lean"), [
    ({"query": "头痛"}, SearchQuery("头痛")),
    ({"query": "头痛", "k": 3, "filters": None, "instruction": "Find"}, SearchQuery("头痛", 3, None, "Find")),
    ({"query": "头痛", "k": "3"}, None),  # the model coerces it
    ({"query": "头痛", "k": True}, None),
    ({"query": "头痛", "k": 0}, None),
    ({"query": "头痛", "filters": {"department": "x"}}, None),
    ({"query": "头痛", "extra": 1}, None),
    ({"query": " \u200b"}, None),
    ({"query": "头痛", "instruction": "x" * 5000}, None),
    ({"k": 3}, None),
])
def test_lean_request_takes_only_what_the_model_would_take_unchanged(payload, lean):
    assert lean_request(payload) == lean


@pytest.fixture(scope="module")
def lean_service(engine):
    with serve_in_thread(create_app(engine)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=40), k=st.integers(min_value=1, max_value=8))
def test_any_query_through_the_lean_path_gets_the_bare_engines_hits(lean_service, engine, query, k):
    response = lean_service.post("/search", content=json.dumps({"query": query, "k": k}),
                                 headers={"content-type": "application/json"})
    if response.status_code == 422:
        assert lean_request({"query": query, "k": k}) is None  # only what the model also refuses
        return
    assert response.status_code == 200, response.text
    (found,) = engine.search_vectors([query], [k], instruction=None)
    assert response.json()["hits"] == json.loads(json.dumps(engine.hits(found, k, None)))  # same ids, scores, texts


def test_the_http_parser_and_event_loop_are_typed_serve_settings(engine):
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from care.errors import CareError

    assert ServeConfig().http_parser == "httptools" and ServeConfig().event_loop == "uvloop"
    config = ServeConfig.from_dict({"http_parser": "h11", "event_loop": "asyncio", "lean_search": False})
    assert ServeConfig.from_dict(config.to_dict()) == config
    with pytest.raises(CareError, match="http_parser"):
        ServeConfig(http_parser="granian")  # type: ignore[arg-type]
    h11 = build_server(create_app(with_config(engine, http_parser="h11", event_loop="asyncio")))
    assert issubclass(h11.config.http, H11Protocol) and h11.config.loop == "asyncio"
    default = build_server(create_app(engine))
    assert issubclass(default.config.http, HttpToolsProtocol) and default.config.loop == "uvloop"
    with serve_in_thread(create_app(with_config(engine, http_parser="h11"))) as url:
        assert httpx.post(url + "/search", json={"query": "头痛", "k": 2}).json()["k"] == 2
