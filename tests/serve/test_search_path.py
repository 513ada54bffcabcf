"""The /search hot path (care.serve.search_path) answers exactly like the FastAPI route it bypasses."""

from __future__ import annotations

import httpx
import pytest

from care.serve.app import create_app
from care.serve.search_path import NOT_AN_OBJECT, SearchFastPath, validation_detail
from care.serve.server import serve_in_thread

from .engine_config import with_config

#: Bodies every path must answer the same way: good ones, and each kind of refusal.
BODIES = [
    b'{"query": "\\u5934\\u75db\\u600e\\u4e48\\u529e", "k": 3}',
    '{"query": "胸痛", "k": 5, "filters": {"department": ["cardiology", "neurology"]}}'.encode(),
    '{"query": "胸痛", "instruction": "Find answers"}'.encode(),
    b'{"query": "   "}',  # handler-level text check: 422
    '{"query": "头痛", "k": 0}'.encode(),  # model: k >= 1
    '{"query": "头痛", "k": "three"}'.encode(),  # model: not an integer
    '{"query": "头痛", "k": 1000}'.encode(),  # handler: k above max_k
    '{"query": "头痛", "colour": "red"}'.encode(),  # model: extra field forbidden
    b'{"k": 3}',  # model: query missing
    b'{"query": "\\u5934\\ud800"}',  # lone surrogate (orjson refuses the escape, the model names it)
]
#: Bodies the hot path words more plainly than FastAPI's "Input should be a valid dictionary or object ...".
NOT_OBJECTS = [b"[1, 2]", b'"headache"', b""]


def _answers(app, bodies: list[bytes] = BODIES) -> list[tuple[int, dict]]:
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        out = []
        for body in bodies:
            response = client.post("/search", content=body, headers={"content-type": "application/json"})
            payload = response.json()
            payload.pop("took_ms", None)
            out.append((response.status_code, payload))
        return out


def test_fast_path_answers_like_the_fastapi_route(engine):
    route_app = create_app(with_config(engine, fast_search=False))
    assert not any(m.cls is SearchFastPath for m in route_app.user_middleware)
    fast, route = _answers(create_app(engine)), _answers(route_app)
    assert [status for status, _ in fast] == [200, 200, 200, 422, 422, 422, 422, 422, 422, 422]
    assert fast == route  # same hits in the same order, same refusals word for word
    assert fast[0][1]["k"] == 3 and len(fast[0][1]["hits"]) == 3
    assert "k: Input should be greater than or equal to 1" in fast[4][1]["detail"]
    assert "query contains a lone surrogate" in fast[9][1]["detail"]


def test_fast_path_asks_for_a_json_object(engine):
    for status, payload in _answers(create_app(engine), NOT_OBJECTS):
        assert status == 422 and payload["detail"] == f"invalid request: body: {NOT_AN_OBJECT}"


def test_fast_path_answers_search_and_passes_everything_else_on(engine):
    app = create_app(engine)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/search", json={"query": "头痛"}).status_code == 200
        assert app.state.batcher.inline_calls == 1  # answered, through the same batcher
        assert client.get("/search").status_code == 405  # other methods still reach FastAPI's routing
        assert client.post("/embed", json={"inputs": ["头痛"]}).status_code == 200
        metrics = client.get("/metrics").text
    assert 'care_requests_total{endpoint="/search",status="200"}' in metrics
    assert 'care_requests_total{endpoint="/search",status="405"}' in metrics


def test_fast_path_answers_503_with_retry_after_when_the_queue_is_full(engine):
    app = create_app(with_config(engine))
    with serve_in_thread(app) as url:
        app.state.batcher.max_queue = 0  # every request finds the queue full
        response = httpx.post(url + "/search", json={"query": "头痛"}, timeout=30)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1" and "retry shortly" in response.json()["detail"]


@pytest.mark.parametrize(("errors", "expected"), [
    ([{"loc": ("body", "k"), "msg": "Input should be a valid integer"}], "invalid request: k: Input should be a valid integer"),
    ([{"loc": (), "msg": "Input should be a valid dictionary"}, {"loc": ("query",), "msg": "Field required"}],
     "invalid request: body: Input should be a valid dictionary; query: Field required"),
])
def test_validation_detail_names_each_field(errors, expected):
    assert validation_detail(errors) == expected


def test_the_hot_path_is_a_serve_setting_that_round_trips():
    from care.serve.config import ServeConfig

    assert ServeConfig().fast_search is True
    config = ServeConfig.from_dict({"fast_search": False, "inline_max_items": 0})
    assert config.fast_search is False and ServeConfig.from_dict(config.to_dict()) == config


def _damaged_store_engine(flat_index, tmp_path, damage: str):
    """An engine over a copy of ``flat_index`` whose document store was damaged after the build, loaded with
    ``verify="off"`` so the damage reaches the first read: ``missing`` moves row 3 away (the index still returns
    it), ``malformed`` flips the docs table's page header (SQLite: "database disk image is malformed"), ``altered``
    changes one character of a document's text (SQLite reads it; only the row's checksum tells)."""
    import shutil
    import sqlite3

    from care.serve.engine import load_engine

    folder = tmp_path / damage
    shutil.copytree(flat_index, folder)
    store = folder / "docstore.sqlite"
    if damage == "missing":
        conn = sqlite3.connect(store)
        conn.execute("UPDATE docs SET row = row + 1000 WHERE row = 3")
        conn.commit()
        conn.close()
    elif damage == "altered":
        data = store.read_bytes()
        store.write_bytes(data.replace("偏头痛发作".encode(), "偏头疼发作".encode(), 1))  # same length, valid UTF-8
    else:
        data = bytearray(store.read_bytes())
        page = 4096  # the docs table's page follows the schema page
        for i in range(page, page + 16):
            data[i] ^= 0xFF
        store.write_bytes(bytes(data))
    return load_engine(folder, verify="off")


@pytest.mark.parametrize("fast_search", [True, False], ids=["fast-path", "fastapi-route"])
@pytest.mark.parametrize("damage", ["missing", "malformed", "altered"])
def test_a_document_store_that_fails_while_answering_is_a_logged_counted_500_never_fewer_hits(
        flat_index, tmp_path, caplog, damage, fast_search):
    import logging

    from care.testing.tiny_model import SAMPLE_DOCS

    engine = with_config(_damaged_store_engine(flat_index, tmp_path, damage), fast_search=fast_search)
    body = {"query": "头痛", "k": len(SAMPLE_DOCS)}  # every row: the damaged one among them
    with serve_in_thread(create_app(engine)) as url, httpx.Client(base_url=url, timeout=30) as client:
        with caplog.at_level(logging.ERROR, logger="care.serve.search_path"):
            response = client.post("/search", json=body)
        metrics = client.get("/metrics").text
    assert response.status_code == 500, response.text
    assert "the document store failed on this request" in response.json()["detail"]
    expected = {"missing": "has no row 3 that the vector index returned", "malformed": "malformed",
                "altered": "row 0's content does not match its checksum"}
    assert expected[damage] in response.text
    assert "/search: the document store failed" in caplog.text and "Traceback" in caplog.text
    assert 'care_requests_total{endpoint="/search",status="500"} 1.0' in metrics


def test_the_damaged_store_is_refused_at_start_up_by_default(flat_index, tmp_path):
    """The same damage as above, with the default ``verify="full"``: the service never starts."""
    import shutil

    from care.index.integrity import IndexDamagedError
    from care.serve.engine import load_engine

    folder = tmp_path / "copy"
    shutil.copytree(flat_index, folder)
    data = bytearray((folder / "docstore.sqlite").read_bytes())
    data[4096] ^= 0xFF
    (folder / "docstore.sqlite").write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError, match=r"docstore\.sqlite is damaged .*care index build --merge"):
        load_engine(folder)
