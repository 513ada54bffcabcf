"""``stage2_distill``: Stage II's joint training plus a KL term to a frozen teacher's in-batch scores."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from care.train.config import ConfigError, TrainConfig
from care.train.stages import DOCUMENT_TOWER, QUERY_TOWER, TEACHER, build_stage
from care.train.trainer import train

from .trainer_fixtures import tiny_config_dict, toy_rows


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f.read_bytes())
    return h.hexdigest()


def _kl_to_teacher(config: TrainConfig, query_path: str, document_path: str) -> float:
    """The stage's loss (its KL term only, as configured) of a CARE model on the toy set, dropout off; the
    teacher is the frozen tower at ``config.model.document_model``."""
    from care.train.data import TrainingBatch
    from care.train.teacher import TowerEncoder
    from care.train.towers import load_document_tower, load_query_tower

    stage = build_stage(config)
    towers = {QUERY_TOWER: load_query_tower(config.model, path=query_path).eval(),
              DOCUMENT_TOWER: load_document_tower(config.model, trainable=False, path=document_path)}
    teacher = stage.teacher_encoder(TowerEncoder(load_document_tower(config.model, trainable=False), "t", "fp"),
                                    config.model.query_prompt)
    rows = toy_rows()
    batch = TrainingBatch([r["query"] for r in rows], [r["pos"][0] for r in rows],
                          [n for r in rows for n in r["neg"]], 2, [None] * len(rows), [None] * len(rows))
    with torch.no_grad():
        emb = {f: torch.from_numpy(teacher.encode_documents(t)) if stage.field_towers[f] == TEACHER
               else towers[stage.field_towers[f]].encode(t, convert_to_tensor=True)
               for f, t in stage.batch_texts(batch, config.model.query_prompt).items()}
        return float(stage.compute_loss(emb, n_negatives=2).loss)


def test_stage2_distill_trains_both_towers_towards_the_frozen_teachers_scores(tiny_dir, tmp_path):
    torch.set_num_threads(1)
    teacher_before = _digest(tiny_dir / "tiny-qwen3")
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
    assert _digest(tiny_dir / "tiny-qwen3") == teacher_before  # the teacher (and the start) stays as it was
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
