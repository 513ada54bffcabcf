"""Shared fixtures of the index tests: a random-init tiny CARE model (one torch thread) and the sample corpus."""

from __future__ import annotations

import pytest
import torch

from care.testing.tiny_model import make_tiny_care_model, write_corpus


@pytest.fixture(scope="module")
def tiny_care(tmp_path_factory):
    torch.set_num_threads(1)
    return make_tiny_care_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl")
