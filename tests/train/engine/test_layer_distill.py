"""Layer-wise distillation (care.train.engine.layer_distill): the map, both terms against their formulas, the trainer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from care.config import ConfigError
from care.train.engine.config import TrainConfig
from care.train.engine.layer_distill import (
    LayerDistiller,
    LayerDistillError,
    LayerDistillSettings,
    hidden_state_loss,
    layer_map,
    load_layer_teacher,
    relation_loss,
    transformer_layers,
)

from ..trainer_fixtures import PAIRS, tiny_config_dict


def test_layer_map_is_tinyberts_uniform_map_ending_at_the_last_layer():
    assert layer_map(6, 12) == [(1, 2), (2, 4), (3, 6), (4, 8), (5, 10), (6, 12)]
    assert layer_map(3, 12) == [(1, 4), (2, 8), (3, 12)]
    assert layer_map(1, 12) == [(1, 12)]
    assert layer_map(2, 3) == [(1, 2), (2, 3)]  # round(1.5) = 2
    with pytest.raises(LayerDistillError, match="cannot map 4 student layers onto 2"):
        layer_map(4, 2)


def test_hidden_state_loss_is_the_masked_mean_squared_error_averaged_over_pairs():
    mask = torch.tensor([[1, 1, 0]])
    s1, t2 = torch.zeros(1, 3, 2), torch.tensor([[[1.0, 1.0], [0.0, 2.0], [99.0, 99.0]]])  # last token is padding
    s2, t4 = torch.ones(1, 3, 2), torch.ones(1, 3, 2)
    value = hidden_state_loss({1: s1, 2: s2}, {2: t2, 4: t4}, [(1, 2), (2, 4)], mask)
    # pair (1, 2): tokens 1 and 2 give (1+1)/2 = 1 and (0+4)/2 = 2 -> 1.5; pair (2, 4): 0; mean over pairs 0.75
    assert value.item() == pytest.approx(0.75)


def test_hidden_state_loss_refuses_different_widths_with_the_way_out():
    mask = torch.ones(1, 2)
    with pytest.raises(LayerDistillError, match="lambda_relations alone"):
        hidden_state_loss({1: torch.zeros(1, 2, 4)}, {1: torch.zeros(1, 2, 8)}, [(1, 1)], mask)


def _manual_relation_kl(s: torch.Tensor, t: torch.Tensor, heads: int, length: int) -> float:
    """KL(teacher || student) of one sequence's relation matrices, by loops over heads and tokens."""
    width = s.shape[-1] // heads
    total, count = 0.0, 0
    for r in range(heads):
        xs, xt = s[0, :length, r * width:(r + 1) * width], t[0, :length, r * width:(r + 1) * width]
        ps = torch.softmax(xs @ xs.T / math.sqrt(width), dim=-1)
        pt = torch.softmax(xt @ xt.T / math.sqrt(width), dim=-1)
        for i in range(length):
            total += float((pt[i] * (pt[i].log() - ps[i].log())).sum())
            count += 1
    return total / count


def test_relation_loss_matches_the_minilm_v2_formula_and_ignores_padding():
    torch.manual_seed(0)
    student = {name: torch.randn(1, 4, 8) for name in "qkv"}
    teacher = {name: torch.randn(1, 4, 8) for name in "qkv"}
    mask = torch.tensor([[1, 1, 1, 0]])
    value = relation_loss(student, teacher, mask, heads=2).item()
    expected = sum(_manual_relation_kl(student[n], teacher[n], 2, 3) for n in "qkv") / 3
    assert value == pytest.approx(expected, rel=1e-5)
    padded = {name: x.clone() for name, x in student.items()}
    for x in padded.values():
        x[0, 3] = 50.0  # whatever sits at the padding position must not count
    assert relation_loss(padded, teacher, mask, heads=2).item() == pytest.approx(value, rel=1e-5)
    assert relation_loss(teacher, teacher, mask, heads=2).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(LayerDistillError, match="does not divide"):
        relation_loss(student, teacher, mask, heads=3)


@pytest.fixture(scope="module")
def deep_and_cut(tmp_path_factory) -> tuple[Path, Path]:
    """A 4-layer tiny BERT (the teacher) and its strided 2-layer cut (the student), one tokenizer."""
    from dataclasses import replace

    from care.models.presets import TINY_BERT, make_tiny_models
    from care.models.prune import prune_layers

    root = tmp_path_factory.mktemp("layers")
    deep, _ = make_tiny_models([t for pair in PAIRS for t in pair], root,
                               query_shape=replace(TINY_BERT, num_hidden_layers=4))
    return deep, prune_layers(deep, 2, root / "cut", keep="strided")


def _features(folder: Path, texts: list[str]) -> dict:
    from transformers import AutoTokenizer

    return dict(AutoTokenizer.from_pretrained(str(folder))(texts, padding=True, return_tensors="pt"))


def test_the_distiller_pairs_layers_and_a_copy_of_the_teacher_scores_zero(deep_and_cut):
    from transformers import AutoModel

    deep, cut = deep_and_cut
    teacher, student = load_layer_teacher(str(deep)), AutoModel.from_pretrained(str(cut))
    both = LayerDistillSettings(lambda_hidden=1.0, lambda_relations=0.5, relation_heads=4)
    distiller = LayerDistiller(teacher, student, both)
    assert distiller.pairs == [(1, 2), (2, 4)] and distiller.teacher_relation_layer == 4
    features = _features(deep, [PAIRS[0][0], PAIRS[1][1]])
    with distiller.student_taps(student) as taps:
        student(**features)
    terms = distiller.terms(taps, features)
    assert set(terms) == {"hidden", "relations"} and terms["relations"][0] == 0.5
    assert terms["hidden"][1].item() > 0 and terms["relations"][1].item() > 0
    assert terms["hidden"][1].requires_grad  # it trains the student

    same = AutoModel.from_pretrained(str(deep))
    self_distiller = LayerDistiller(load_layer_teacher(str(deep)), same, both)
    with self_distiller.student_taps(same) as taps:
        same(**features)
    assert all(value.item() == pytest.approx(0.0, abs=1e-6) for _, value in self_distiller.terms(taps, features).values())
    # the hooks are gone once the block ends: a later forward fills nothing
    taps.hidden.clear()
    same(**features)
    assert not taps.hidden


def test_a_static_tower_or_a_foreign_tokenizer_is_refused_with_the_reason(deep_and_cut, tmp_path):
    from transformers import AutoModel

    from care.models.prune import prune_layers

    deep, _ = deep_and_cut
    static = AutoModel.from_pretrained(str(prune_layers(deep, 0, tmp_path / "static")))
    with pytest.raises(LayerDistillError, match="static-embedding"):
        transformer_layers(static)
    teacher = load_layer_teacher(str(deep))
    distiller = LayerDistiller(teacher, AutoModel.from_pretrained(str(deep)), LayerDistillSettings(lambda_hidden=1.0))
    too_big = {"input_ids": torch.tensor([[teacher.get_input_embeddings().num_embeddings + 5]]),
               "attention_mask": torch.ones(1, 1, dtype=torch.long)}
    with pytest.raises(LayerDistillError, match="teacher's tokenizer"):
        distiller.teacher_taps(too_big)
    with pytest.raises(LayerDistillError, match="no config.json"):
        load_layer_teacher(str(tmp_path / "nowhere"))


def test_config_accepts_layer_terms_only_where_the_query_tower_trains_alone(tiny_dir, tmp_path):
    base = tiny_config_dict(tiny_dir, "stage1", tmp_path / "out")
    TrainConfig.from_dict({**base, "loss": {**base["loss"], "lambda_hidden": 1.0}})  # stage1: fine
    stage2 = tiny_config_dict(tiny_dir, "stage2", tmp_path / "out", loss={"lambda_relations": 1.0})
    with pytest.raises(ConfigError, match="loss.lambda_hidden.*not 'stage2'"):
        TrainConfig.from_dict(stage2)
    with pytest.raises(ConfigError, match="loss.lambda_hidden.*>= 0"):
        TrainConfig.from_dict({**base, "loss": {**base["loss"], "lambda_hidden": -1.0}})
    chunked = {**base, "loss": {**base["loss"], "lambda_hidden": 1.0}, "optim": {**base["optim"], "grad_cache_chunk_size": 2}}
    with pytest.raises(ConfigError, match="grad_cache_chunk_size"):
        TrainConfig.from_dict(chunked)


def _train_stage1(deep: Path, cut: Path, tiny_dir: Path, out: Path, **loss) -> list[dict]:
    from care.train.engine.trainer import train

    from ..trainer_fixtures import frozen_teacher

    data = tiny_config_dict(tiny_dir, "stage1", out, model={"query_model": str(cut), "document_model": str(deep),
                                                             "document_pooling": "mean", "lora": None},
                            loss={"temperature": 0.1, **loss}, optim={"max_steps": 8, "lr": 3e-3})
    config = TrainConfig.from_dict(data)
    train(config, teacher=frozen_teacher(config))
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def _distance_to_teacher(deep: Path, query_folder: Path) -> dict[str, float]:
    """Both layer terms of a trained query tower against the teacher, on every toy text."""
    from sentence_transformers import SentenceTransformer

    student = SentenceTransformer(str(query_folder), device="cpu")[0].auto_model
    distiller = LayerDistiller(load_layer_teacher(str(deep)), student,
                               LayerDistillSettings(lambda_hidden=1.0, lambda_relations=1.0, relation_heads=4))
    features = _features(deep, [t for pair in PAIRS for t in pair])
    with torch.no_grad(), distiller.student_taps(student) as taps:
        student(**features)
    return {name: value.item() for name, (_, value) in distiller.terms(taps, features).items()}


def test_stage1_with_layer_terms_logs_them_and_keeps_the_tower_closer_to_the_teachers_layers(deep_and_cut, tiny_dir,
                                                                                              tmp_path):
    deep, cut = deep_and_cut
    metrics = _train_stage1(deep, cut, tiny_dir, tmp_path / "layers", lambda_hidden=1.0, lambda_relations=1.0,
                            relation_heads=4)
    first = metrics[0]
    assert {"loss/hidden", "loss/relations", "loss/mse"} <= set(first)
    # the total is the stage's terms plus the weighted layer terms
    parts = sum(v for k, v in first.items() if k.startswith("loss/"))
    assert first["loss"] == pytest.approx(parts, rel=1e-4)
    plain = _train_stage1(deep, cut, tiny_dir, tmp_path / "plain")
    assert "loss/hidden" not in plain[0]
    layered, output_only = (_distance_to_teacher(deep, tmp_path / name / "query") for name in ("layers", "plain"))
    assert layered["hidden"] < output_only["hidden"] and layered["relations"] < output_only["relations"]
