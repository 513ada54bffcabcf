"""The baseline stages train end to end on tiny models against a frozen, cached teacher."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from care.train.engine.config import TrainConfig
from care.train.engine.trainer import read_result, train

from ..trainer_fixtures import folder_digest, frozen_teacher, tiny_config_dict, toy_rows, toy_stage_loss

PROMPT = "Instruct: 检索\nQuery: "


@pytest.fixture(scope="module")
def pruned(tiny_dir, tmp_path_factory) -> Path:
    from care.models.prune import prune_layers

    return prune_layers(tiny_dir / "tiny-qwen3", 1, tmp_path_factory.mktemp("pruned") / "qwen3-1")


def _toy_loss(config: TrainConfig, query_path: str) -> float:
    """The stage's loss on the whole toy set (dropout off), teacher = the frozen document tower."""
    from care.train.engine.towers import load_query_tower

    return toy_stage_loss(config, {"query": load_query_tower(config.model, path=query_path).eval(),
                                   "teacher": frozen_teacher(config)})


def _run(tiny_dir, out, stage, **sections) -> tuple[TrainConfig, object]:
    torch.set_num_threads(1)
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, stage, out, **sections))
    return config, train(config)


def test_kale_align_pruned_decoder_query_tower(tiny_dir, pruned, tmp_path):
    before = folder_digest(tiny_dir / "tiny-qwen3")
    config, result = _run(tiny_dir, tmp_path / "kale", "kale_align",
                          model={"query_model": str(pruned), "query_pooling": "lasttoken", "query_prompt": PROMPT},
                          loss={"temperature": 0.05, "teacher_temperature": 0.02})
    assert result.global_step == 6 and read_result(tmp_path / "kale").completed
    assert _toy_loss(config, result.query_model) < _toy_loss(config, str(pruned))
    assert folder_digest(tiny_dir / "tiny-qwen3") == before  # the teacher is frozen
    from sentence_transformers import SentenceTransformer

    care = SentenceTransformer(result.care_model, device="cpu")  # pruned query tower + frozen document tower
    assert care.encode_query(["头痛"]).shape == care.encode_document(["头痛"]).shape == (1, 128)
    assert SentenceTransformer(result.query_model, device="cpu")[1].pooling_mode == "lasttoken"


def test_embed_distill_moves_student_onto_teacher_query_vectors(tiny_dir, pruned, tmp_path):
    config, result = _run(tiny_dir, tmp_path / "wl", "embed_distill",
                          model={"query_model": str(pruned), "query_pooling": "lasttoken", "query_prompt": PROMPT})
    assert _toy_loss(config, result.query_model) < _toy_loss(config, str(pruned))
    # only the (instructed) queries were embedded by the teacher: no document text is needed
    cache = list((tmp_path / "wl" / "teacher_cache").rglob("embeddings.npy"))
    assert len(cache) == 1
    import numpy as np

    assert np.load(cache[0]).shape == (len(toy_rows()), 128)


def test_score_distill_symmetric_student_with_a_wider_teacher(tiny_dir, tmp_path):
    config, result = _run(tiny_dir, tmp_path / "sd", "score_distill",
                          model={"truncate_to_query_width": False},  # teacher keeps 128 dims, student has 64
                          loss={"temperature": 0.05, "lambda_distill": 1.0, "lambda_contrastive": 1.0})
    assert _toy_loss(config, result.query_model) < _toy_loss(config, str(tiny_dir / "tiny-bert"))
    assert result.care_model is None and not (tmp_path / "sd" / "model").exists()  # a symmetric student
    import json

    first = json.loads((tmp_path / "sd" / "metrics.jsonl").read_text().splitlines()[0])
    assert {"loss/kl", "loss/infonce"} <= set(first)
