import json

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from care.errors import CareError
from care.models.presets import (
    PRESETS,
    QWEN3_4B,
    build_random_model,
    count_parameters,
    shape_from_dict,
    shape_from_json,
    shape_to_json,
)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_shapes_round_trip_through_json(name):
    shape = PRESETS[name]
    assert shape_from_json(shape_to_json(shape)) == shape


def test_shape_errors_name_the_problem():
    with pytest.raises(CareError, match=r"decoder model shape: unknown field.*hiden_size"):
        shape_from_dict({**QWEN3_4B.to_dict(), "hiden_size": 1})
    with pytest.raises(CareError, match="kind"):
        shape_from_dict({"name": "x"})
    with pytest.raises(CareError, match="grouped-query"):
        shape_from_dict({**QWEN3_4B.to_dict(), "num_key_value_heads": 5})


def test_paper_shapes_match_their_published_sizes():
    cfg = QWEN3_4B.to_hf_config()
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (2560, 36, 32, 8)
    assert (cfg.intermediate_size, cfg.vocab_size, cfg.head_dim) == (9728, 151936, 128)
    # Qwen3-4B model card: 4.0B parameters (tied embeddings, so the base model holds them all)
    assert 3.95e9 < count_parameters("qwen3-4b") < 4.05e9
    assert PRESETS["gte-multilingual-base"].to_hf_config().vocab_size == 250048


def test_random_model_is_seeded():
    a = build_random_model("tiny-bert", vocab_size=50, seed=3)
    b = build_random_model("tiny-bert", vocab_size=50, seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(CareError, match="vocab"):
        build_random_model("tiny-qwen3")


def test_make_tiny_models_writes_loadable_hf_folders(tiny_dirs):
    query_dir, document_dir = tiny_dirs
    bert = AutoModel.from_pretrained(query_dir)
    qwen = AutoModel.from_pretrained(document_dir)
    assert bert.config.model_type == "bert" and bert.config.hidden_size == 64
    assert qwen.config.model_type == "qwen3" and qwen.config.num_key_value_heads == 2
    tok = AutoTokenizer.from_pretrained(document_dir)
    assert qwen.config.vocab_size == len(tok) and qwen.config.eos_token_id == tok.eos_token_id
    recorded = json.loads((document_dir / "care_shape.json").read_text())
    assert shape_from_dict(recorded).vocab_size == len(tok)


def test_make_tiny_models_needs_text(tmp_path):
    from care.models.presets import make_tiny_models

    with pytest.raises(CareError, match="non-empty text"):
        make_tiny_models(["", "  "], tmp_path)
