"""e5-style towers: a document prefix on trained document texts, and a BERT document tower with mean pooling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from care.data.training import QUERY_ALIGN
from care.train.engine.config import ConfigError, TrainConfig
from care.train.engine.data import TrainingBatch
from care.train.engine.stage import QueryAwareTeacher, build_stage, teacher_query_key
from care.train.engine.teacher import TowerEncoder

from ..trainer_fixtures import tiny_config_dict


def _batch() -> TrainingBatch:
    return TrainingBatch(queries=["头痛怎么办"], positives=["多休息"], negatives=["按时吃饭"], n_negatives=1,
                         prompts=[None], types=[None])


@pytest.mark.parametrize("stage", ["init_query", "init_document", "stage2"])
def test_trained_towers_see_the_document_prompt_on_documents_only(stage, tiny_dir, tmp_path):
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, stage, tmp_path))
    texts = build_stage(config).batch_texts(_batch(), "query: ", "passage: ")
    assert texts["query"] == ["query: 头痛怎么办"]
    assert texts["positive"] == ["passage: 多休息"] and texts["negative"] == ["passage: 按时吃饭"]


def test_teacher_fields_stay_raw_so_the_cache_keys_are_the_texts(tiny_dir, tmp_path):
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage1_sft", tmp_path))
    texts = build_stage(config).batch_texts(_batch(), "query: ", "passage: ")
    assert texts["positive"] == ["多休息"] and texts["negative"] == ["按时吃饭"]


class _Echo:
    """A tower stand-in that records what it was asked to encode."""

    def __init__(self):
        self.seen: list[str] = []

    def encode(self, texts, prompt=None, **_):
        self.seen += [(prompt or "") + t for t in texts]
        return np.ones((len(texts), 4), dtype=np.float32) / 2

    def get_embedding_dimension(self):
        return 4


def test_a_document_teacher_prefixes_documents_but_not_the_queries_it_embeds():
    tower = _Echo()
    teacher = QueryAwareTeacher(TowerEncoder(tower, "t", "fp", document_prompt="passage: "), "query: ")
    teacher.encode_documents(["多休息", teacher_query_key("头痛", None, QUERY_ALIGN)])
    assert sorted(tower.seen) == ["passage: 多休息", "query: 头痛"]


def test_bert_document_tower_with_mean_pooling_and_lora(tiny_dir, tmp_path):
    from care.train.engine.towers import load_document_tower

    config = TrainConfig.from_dict(tiny_config_dict(
        tiny_dir, "stage2", tmp_path, model={"document_model": str(tiny_dir / "tiny-bert"), "document_pooling": "mean",
                                              "lora": {"r": 4, "alpha": 8, "dropout": 0.0,
                                                       "target_modules": ["query", "key", "value", "dense"]}}))
    tower = load_document_tower(config.model, trainable=True)
    assert tower[1].get_config_dict()["pooling_mode"] == "mean"
    trainable = [n for n, p in tower.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    # the same texts through the plain mean-pooled BERT (LoRA B starts at zero, so the adapter is a no-op)
    from care.models.query import build_query_encoder

    plain = build_query_encoder(tiny_dir / "tiny-bert", pooling="mean", max_seq_length=32)
    with torch.no_grad():
        np.testing.assert_allclose(tower.encode(["胸闷气短"]), plain.encode(["胸闷气短"]), atol=1e-5)
    with pytest.raises(ConfigError, match="model.document_pooling"):
        TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2", tmp_path, model={"document_pooling": "max"}))
