"""Session fixtures: a tiny BERT (the bench's query-tower preset) and the toy corpus files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from .fixtures import TEXTS, write_pairs, write_texts


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    """tiny-bert/ (care.models.presets.TINY_BERT), texts.txt, texts.jsonl, pairs.jsonl."""
    from care.models.presets import make_tiny_models

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("pretrain")
    make_tiny_models(TEXTS, root)
    write_texts(root / "texts.txt")
    write_texts(root / "texts.jsonl", jsonl=True)
    write_pairs(root / "pairs.jsonl")
    return root


@pytest.fixture(scope="session")
def tiny_bert(tiny_root) -> Path:
    return tiny_root / "tiny-bert"
