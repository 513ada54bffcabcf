"""Session fixtures of the trainer tests: tiny models built once and toy training files."""

from __future__ import annotations

from pathlib import Path

import pytest

from .trainer_fixtures import PAIRS, alignment_rows, toy_rows, write_rows


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """A folder with tiny-bert/, tiny-qwen3/, train.jsonl and alignment.jsonl."""
    from care.models.presets import make_tiny_models

    root = tmp_path_factory.mktemp("tiny")
    make_tiny_models([t for pair in PAIRS for t in pair], root)
    write_rows(root / "train.jsonl", toy_rows())
    write_rows(root / "alignment.jsonl", alignment_rows())
    return root
