"""A folder trained with fixed prefixes is encoded with them by every loader (spec options still win)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from care.encoders.registry import load_model
from care.encoders.stored_prompts import PROMPTS_FILE, stored_prompt_options, write_stored_prompts
from care.errors import CareError

QUERIES = ["头痛怎么办", "高血压吃什么药"]


@pytest.fixture()
def prompted(tiny_bert, tmp_path):
    """A copy of the tiny BERT carrying e5's prefixes."""
    folder = tmp_path / "prompted"
    shutil.copytree(tiny_bert, folder)
    write_stored_prompts(folder, "query: ", "passage: ")
    return folder


def test_a_folder_is_queried_with_its_stored_prefixes(tiny_bert, prompted):
    model = load_model(str(prompted))
    assert (model.config.query_prefix, model.config.document_prefix, model.config.instructions) == \
        ("query: ", "passage: ", False)
    plain = load_model(f"{tiny_bert}?query_prefix=query%3A%20&document_prefix=passage%3A%20&instructions=false")
    instruction = "Given a Chinese medical question, retrieve medical documents that answer the question."
    # the stored prefixes, not the task instruction, whatever instruction the task brings
    np.testing.assert_allclose(model.encode_queries(QUERIES, instruction=instruction), plain.encode_queries(QUERIES),
                               atol=1e-6)
    np.testing.assert_allclose(model.encode_documents(QUERIES), plain.encode_documents(QUERIES), atol=1e-6)
    assert model.fingerprint != load_model(str(tiny_bert)).fingerprint


def test_spec_options_override_the_stored_ones(prompted):
    model = load_model(f"{prompted}?instructions=true&query_prefix=q%3A%20")
    assert (model.config.query_prefix, model.config.instructions) == ("q: ", True)
    assert model.config.document_prefix == "passage: "


def test_no_file_means_no_options_and_a_bad_file_is_named(tiny_bert, tmp_path):
    assert stored_prompt_options(tiny_bert) == {}
    assert stored_prompt_options("intfloat/multilingual-e5-small") == {}  # a hub id
    (tmp_path / PROMPTS_FILE).write_text('{"query_prefix": "q", "pooling": "cls"}', encoding="utf-8")
    with pytest.raises(CareError, match=f"{PROMPTS_FILE}: expected a JSON object"):
        stored_prompt_options(tmp_path)
