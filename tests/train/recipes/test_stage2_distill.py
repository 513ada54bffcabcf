"""``stage2_distill``: Stage II's joint training plus a KL term to a frozen teacher's in-batch scores."""

from __future__ import annotations

import json

import pytest
import torch

from care.train.engine.config import ConfigError, TrainConfig
from care.train.engine.stage import DOCUMENT_TOWER, QUERY_TOWER, TEACHER, build_stage
from care.train.engine.trainer import train

from ..trainer_fixtures import folder_digest, frozen_teacher, tiny_config_dict, toy_rows, toy_stage_loss


def _kl_to_teacher(config: TrainConfig, query_path: str, document_path: str) -> float:
    """The stage's loss (its KL term only, as configured) of a CARE model on the toy set, dropout off; the
    teacher is the frozen tower at ``config.model.document_model``."""
    from care.train.engine.towers import load_document_tower, load_query_tower

    return toy_stage_loss(config, {QUERY_TOWER: load_query_tower(config.model, path=query_path).eval(),
                                   DOCUMENT_TOWER: load_document_tower(config.model, trainable=False, path=document_path),
                                   TEACHER: frozen_teacher(config)})


def test_stage2_distill_trains_both_towers_towards_the_frozen_teachers_scores(tiny_dir, tmp_path):
    torch.set_num_threads(1)
    teacher_before = folder_digest(tiny_dir / "tiny-qwen3")
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2_distill", tmp_path / "sd",
                                                    loss={"temperature": 0.05, "lambda_contrastive": 0.0,
                                                          "lambda_distill": 1.0}))
    stage = build_stage(config)
    assert stage.trainable_towers == (QUERY_TOWER, DOCUMENT_TOWER)
    assert stage.uses_teacher and stage.teacher_scores_only  # the teacher's vectors only meet each other
    start = _kl_to_teacher(config, str(tiny_dir / "tiny-bert"), str(tiny_dir / "tiny-qwen3"))

    result = train(config)

    assert result.global_step == 6 and result.care_model == str(tmp_path / "sd" / "model")
    assert (tmp_path / "sd" / "query").is_dir() and (tmp_path / "sd" / "document").is_dir()
    assert _kl_to_teacher(config, result.query_model, result.document_model) < start
    assert folder_digest(tiny_dir / "tiny-qwen3") == teacher_before  # the teacher (and the start) stays as it was
    first = json.loads((tmp_path / "sd" / "metrics.jsonl").read_text().splitlines()[0])
    assert "loss/kl" in first and "loss/infonce" not in first  # a zero-weight term is not computed
    # the teacher embedded each query as a query and every positive / negative: nothing else
    cache = next((tmp_path / "sd" / "teacher_cache").rglob("embeddings.npy"))
    texts = {r["query"] for r in toy_rows()} | {t for r in toy_rows() for t in (*r["pos"], *r["neg"])}
    import numpy as np

    assert np.load(cache).shape[0] == len(texts)


def test_stage2_distill_needs_a_nonzero_weight(tiny_dir, tmp_path):
    with pytest.raises(ConfigError, match="lambda_distill.*cannot both be 0"):
        TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2_distill", tmp_path,
                                               loss={"lambda_contrastive": 0.0, "lambda_distill": 0.0}))
