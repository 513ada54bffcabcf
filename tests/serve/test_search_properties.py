"""``/search`` on arbitrary Unicode queries (issue 40): every answer is 200 with hits, or a 422 that
says what is wrong with the query — never a 5xx. Which it is follows the edge's rule
(:func:`care.data.text_rules.text_problem`) and the query length limit."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from care.data.text_rules import text_problem
from care.serve.app import create_app
from care.serve.config import ServeConfig
from care.serve.server import serve_in_thread

from ..hostile_text import HOSTILE_TEXTS

#: Requests per property (each is one loopback round trip through the batcher and the tiny model).
MAX_EXAMPLES = 100
#: Hits asked per request.
K = 3
#: HTTP status of a request the service refuses for its content.
UNPROCESSABLE = 422
OK = 200


@pytest.fixture(scope="module")
def service(engine):
    with serve_in_thread(create_app(engine)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client


def _with_hostile_examples(test):
    for text in (*HOSTILE_TEXTS, "\ud800", "a\x00b", "", " \u200b\ufeff"):
        test = example(text)(test)
    return test


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(st.characters(exclude_categories=())) | st.text())
@_with_hostile_examples
def test_search_answers_200_or_a_readable_422(service, query):
    # json.dumps escapes every non-ASCII character, so lone surrogates travel as \ud800 escapes
    response = service.post("/search", content=json.dumps({"query": query, "k": K}),
                            headers={"content-type": "application/json"})
    refused = text_problem(query) is not None or len(query) > ServeConfig().max_query_chars
    assert response.status_code == (UNPROCESSABLE if refused else OK), (query, response.text)
    body = response.json()
    if refused:
        assert "query" in json.dumps(body["detail"])
    else:
        assert len(body["hits"]) == K and all(isinstance(hit["score"], float) for hit in body["hits"])
