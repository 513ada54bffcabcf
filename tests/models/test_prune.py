"""Pruning keeps N layers: the first N (outputs equal the original's hidden states of layer N) or strided."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from care.errors import CareError
from care.models.prune import find_layers, prune_layers

TEXTS = ["头痛怎么办", "发烧"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from care.models.presets import make_tiny_models

    root = tmp_path_factory.mktemp("prune")
    return make_tiny_models(["头痛怎么办吃什么药", "发烧怎么退烧"], root)


def _states(path, texts, **kw):
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    with torch.no_grad():
        return model, model(**tok(texts, padding=True, return_tensors="pt"), **kw)


def test_pruned_bert_equals_layer_n_hidden_states(tiny, tmp_path):
    torch.set_num_threads(1)
    query_dir, _ = tiny
    out = prune_layers(query_dir, 1, tmp_path / "bert-1")
    assert AutoConfig.from_pretrained(out).num_hidden_layers == 1
    _, original = _states(query_dir, TEXTS, output_hidden_states=True)
    model, pruned = _states(out, TEXTS)
    assert len(find_layers(model)[1]) == 1
    torch.testing.assert_close(pruned.last_hidden_state, original.hidden_states[1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("keep", ["first", "strided"])
def test_a_cut_to_no_layer_is_the_static_embedding_tower(tiny, tmp_path, keep):
    """0 layers: each token's output is the original's embedding output (token + position + type, LayerNorm);
    the folder reloads, trains its embeddings and exports to ONNX like any cut."""
    torch.set_num_threads(1)
    from care.models.prune import STATIC_TOWER, select_layers

    assert select_layers(12, STATIC_TOWER, keep) == []
    query_dir, _ = tiny
    out = prune_layers(query_dir, STATIC_TOWER, tmp_path / f"bert-0-{keep}", keep=keep)
    assert AutoConfig.from_pretrained(out).num_hidden_layers == 0
    _, original = _states(query_dir, TEXTS, output_hidden_states=True)
    model, pruned = _states(out, TEXTS)
    assert len(model.encoder.layer) == 0
    torch.testing.assert_close(pruned.last_hidden_state, original.hidden_states[0], rtol=0, atol=1e-6)


def test_the_static_tower_exports_to_onnx_with_the_same_vectors(tiny, tmp_path):
    pytest.importorskip("onnxruntime")
    from care.encoders.onnx import FP32_MAX_COSINE_GAP, OnnxQueryEncoder, cosine_agreement
    from care.encoders.sides import load_side
    from care.models.onnx_export import export_query_encoder

    out = prune_layers(tiny[0], 0, tmp_path / "bert-0")
    spec = f"{out}?pooling=mean"
    export_query_encoder(spec, tmp_path / "onnx", quantize=False)
    reference = load_side(spec, "query", device="cpu", dtype="float32").encode_queries(TEXTS)
    got = OnnxQueryEncoder(tmp_path / "onnx").encode_queries(TEXTS)
    assert cosine_agreement(reference, got).min() >= 1 - FP32_MAX_COSINE_GAP


def test_pruned_qwen3_equals_layer_n_states_up_to_final_norm(tiny, tmp_path):
    torch.set_num_threads(1)
    _, document_dir = tiny
    out = prune_layers(document_dir, 1, tmp_path / "qwen-1")
    config = AutoConfig.from_pretrained(out)
    assert config.num_hidden_layers == 1 and len(config.layer_types) == 1
    original_model, original = _states(document_dir, TEXTS, output_hidden_states=True)
    _, pruned = _states(out, TEXTS)
    # a decoder keeps its final norm: pruned output = norm(hidden state after layer 1)
    with torch.no_grad():
        expected = original_model.norm(original.hidden_states[1])
    torch.testing.assert_close(pruned.last_hidden_state, expected, rtol=0, atol=1e-6)
    # the saved tokenizer appends EOS, so last-token pooling reads the EOS state
    tok = AutoTokenizer.from_pretrained(out)
    assert tok("头痛")["input_ids"][-1] == tok.eos_token_id


def test_pruned_decoder_is_a_lasttoken_query_tower(tiny, tmp_path):
    torch.set_num_threads(1)
    from care.train.engine.config import ModelConfig
    from care.train.engine.towers import load_query_tower

    out = prune_layers(tiny[1], 1, tmp_path / "qwen-q")
    tower = load_query_tower(ModelConfig(query_model=str(out), query_pooling="lasttoken", query_max_seq_length=32))
    assert tower[1].pooling_mode == "lasttoken"
    vecs = tower.encode(TEXTS, convert_to_tensor=True)
    assert vecs.shape == (2, 128)
    torch.testing.assert_close(vecs.norm(dim=-1), torch.ones(2))


def test_prune_from_a_trained_sentence_transformer_folder_merges_lora(tiny, tmp_path):
    """A stage's document folder (LoRA adapter) prunes to a plain model whose layer equals the merged one."""
    torch.set_num_threads(1)
    from care.models.document import build_document_encoder
    from care.models.lora import LoraSettings, lora_merged

    st = build_document_encoder(tiny[1], lora=LoraSettings(r=2, alpha=4, dropout=0.0, target_modules=("q_proj",)))
    lora_a = next(p for n, p in st[0].auto_model.named_parameters() if "lora_B" in n)
    with torch.no_grad():
        lora_a.add_(0.5)  # a non-zero adapter, so merging changes the weights
    st.save(str(tmp_path / "doc"))
    out = prune_layers(tmp_path / "doc", 1, tmp_path / "doc-1")
    hf = st[0].auto_model
    with lora_merged(hf):
        merged_q = hf.layers[0].self_attn.q_proj.weight.detach().clone()
    pruned = AutoModel.from_pretrained(out)
    torch.testing.assert_close(pruned.layers[0].self_attn.q_proj.weight, merged_q)
    assert not any("lora" in n for n, _ in pruned.named_parameters())


def test_bad_layer_count_is_rejected(tiny, tmp_path):
    with pytest.raises(CareError, match="between 0 and 2"):
        prune_layers(tiny[0], 3, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_cli_prune(tiny, tmp_path):
    from typer.testing import CliRunner

    from care.cli import app

    result = CliRunner().invoke(app, ["model", "prune", str(tiny[0]), "--layers", "1", "-o", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert AutoConfig.from_pretrained(tmp_path / "p").num_hidden_layers == 1


@pytest.mark.parametrize(("depth", "n", "expected"), [(12, 6, [0, 2, 4, 6, 8, 10]), (12, 4, [0, 3, 6, 9]),
                                                      (12, 5, [0, 2, 4, 6, 8]), (4, 4, [0, 1, 2, 3]), (4, 1, [0])])
def test_select_layers_strided(depth, n, expected):
    from care.models.prune import select_layers

    assert select_layers(depth, n, "strided") == expected
    assert select_layers(depth, n, "first") == list(range(n))


def test_select_layers_rejects_unknown_mode_and_count():
    from care.models.prune import select_layers

    with pytest.raises(CareError, match="keep='last'"):
        select_layers(12, 6, "last")
    with pytest.raises(CareError, match="between 0 and 12"):
        select_layers(12, 13, "strided")
    with pytest.raises(CareError, match="between 0 and 12"):
        select_layers(12, -1, "first")


def _deep(tmp_path, tiny, kind: str, depth: int = 4):
    """A copy of a tiny model with ``depth`` random layers (the presets have 2)."""
    source = tiny[0] if kind == "bert" else tiny[1]
    config = AutoConfig.from_pretrained(source)
    config.num_hidden_layers = depth
    if getattr(config, "layer_types", None):
        config.layer_types = ["full_attention"] * depth
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    out = tmp_path / f"{kind}-{depth}"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source).save_pretrained(out)
    return out


def test_strided_bert_keeps_layers_0_and_2(tiny, tmp_path):
    torch.set_num_threads(1)
    source = _deep(tmp_path, tiny, "bert")
    out = prune_layers(source, 2, tmp_path / "bert-strided", keep="strided")
    original, pruned = AutoModel.from_pretrained(source), AutoModel.from_pretrained(out)
    assert pruned.config.num_hidden_layers == 2
    for new, old in enumerate([0, 2]):
        torch.testing.assert_close(pruned.encoder.layer[new].attention.self.query.weight,
                                   original.encoder.layer[old].attention.self.query.weight)


def test_strided_qwen3_reloads_with_cache_slots_0_to_n_and_runs_with_cache(tiny, tmp_path):
    torch.set_num_threads(1)
    source = _deep(tmp_path, tiny, "qwen3")
    out = prune_layers(source, 2, tmp_path / "qwen-strided", keep="strided")
    pruned = AutoModel.from_pretrained(out).eval()
    original = AutoModel.from_pretrained(source)
    torch.testing.assert_close(pruned.layers[1].self_attn.q_proj.weight, original.layers[2].self_attn.q_proj.weight)
    assert [layer.self_attn.layer_idx for layer in pruned.layers] == [0, 1]
    assert len(pruned.config.layer_types) == 2
    tok = AutoTokenizer.from_pretrained(out)
    with torch.no_grad():
        result = pruned(**tok(TEXTS, padding=True, return_tensors="pt"), use_cache=True)
    assert result.last_hidden_state.shape[0] == 2 and torch.isfinite(result.last_hidden_state).all()


def test_cli_prune_strided(tiny, tmp_path):
    from typer.testing import CliRunner

    from care.cli import app

    source = _deep(tmp_path, tiny, "bert")
    result = CliRunner().invoke(app, ["model", "prune", str(source), "--layers", "2", "--keep", "strided",
                                      "-o", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert "strided" in result.output
    assert AutoConfig.from_pretrained(tmp_path / "p").num_hidden_layers == 2
