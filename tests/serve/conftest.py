"""Shared fixtures: one tiny CARE model, one corpus and one flat index per test session."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_care(tmp_path_factory):
    from care.testing.tiny_model import make_tiny_care_model

    return make_tiny_care_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    from care.testing.tiny_model import write_corpus

    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl")


@pytest.fixture(scope="session")
def flat_index(tiny_care, corpus, tmp_path_factory):
    from care.index.build import BuildOptions, build

    output = tmp_path_factory.mktemp("index") / "idx"
    build(BuildOptions(model=str(tiny_care), corpus=corpus, output=output, batch_size=4, chunk_size=4))
    return output


@pytest.fixture(scope="session")
def engine(flat_index):
    from care.serve.engine import load_engine

    return load_engine(flat_index)
