"""Feed-forward pruning: neurons that write nothing go first (outputs unchanged), the importance follows the formula,
the narrowed folder reloads and exports, and bad widths or architectures are refused."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from care.errors import CareError
from care.models.ffn_prune import feed_forward_pairs, neuron_importance, prune_ffn, prune_ffn_in_place

TEXTS = ["头痛怎么办", "发烧怎么退烧吃什么药"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from care.models.presets import make_tiny_models

    return make_tiny_models(["头痛怎么办吃什么药", "发烧怎么退烧"], tmp_path_factory.mktemp("ffn"))


def _hidden(model, tokenizer, texts=TEXTS):
    with torch.no_grad():
        return model(**tokenizer(texts, padding=True, return_tensors="pt")).last_hidden_state


def test_neurons_that_write_nothing_are_dropped_first_and_change_nothing(tiny):
    torch.manual_seed(0)
    model = AutoModel.from_pretrained(tiny[0]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny[0])
    full = model.config.intermediate_size
    silent = []
    with torch.no_grad():
        for _, down in feed_forward_pairs(model):
            idle = torch.randperm(full)[: full // 2]
            down.weight[:, idle] = 0  # these neurons' outputs never reach the residual stream
            silent.append(set(idle.tolist()))
    reference = _hidden(model, tokenizer)
    kept = prune_ffn_in_place(model, full - full // 2, neuron_importance(model, tokenizer, TEXTS))
    assert model.config.intermediate_size == full - full // 2
    assert all(not set(k) & idle for k, idle in zip(kept, silent, strict=True))
    assert all(k == sorted(k) for k in kept)  # the original order of the kept neurons
    torch.testing.assert_close(_hidden(model, tokenizer), reference, rtol=0, atol=1e-6)


def test_importance_is_mean_activation_times_output_norm(tiny):
    model = AutoModel.from_pretrained(tiny[0]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny[0])
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    captured = {}
    handle = model.encoder.layer[0].intermediate.register_forward_hook(lambda m, i, o: captured.setdefault("a", o))
    with torch.no_grad():
        model(**batch)
    handle.remove()
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = (captured["a"].abs() * mask).sum(dim=(0, 1)) / mask.sum()
    expected = expected * model.encoder.layer[0].output.dense.weight.norm(dim=0)
    torch.testing.assert_close(neuron_importance(model, tokenizer, TEXTS)[0], expected, rtol=1e-5, atol=1e-7)
    weights_only = neuron_importance(model, tokenizer, ["", "  "])[0]  # no usable text: weights only
    up, down = feed_forward_pairs(model)[0]
    torch.testing.assert_close(weights_only, up.weight.norm(dim=1) * down.weight.norm(dim=0))


def test_the_narrowed_folder_reloads_to_the_same_outputs_and_exports(tiny, tmp_path):
    out = prune_ffn(tiny[0], 8, tmp_path / "narrow", texts=TEXTS)
    assert AutoConfig.from_pretrained(out).intermediate_size == 8
    reloaded = AutoModel.from_pretrained(out).eval()
    assert all(up.out_features == 8 and down.in_features == 8 for up, down in feed_forward_pairs(reloaded))
    model = AutoModel.from_pretrained(tiny[0]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny[0])
    prune_ffn_in_place(model, 8, neuron_importance(model, tokenizer, TEXTS))
    torch.testing.assert_close(_hidden(reloaded, tokenizer), _hidden(model, tokenizer))
    pytest.importorskip("onnxruntime")
    from care.encoders.onnx import FP32_MAX_COSINE_GAP, OnnxQueryEncoder, cosine_agreement
    from care.encoders.sides import load_side
    from care.models.onnx_export import export_query_encoder

    export_query_encoder(f"{out}?pooling=mean", tmp_path / "onnx", quantize=False)
    reference = load_side(f"{out}?pooling=mean", "query", device="cpu", dtype="float32").encode_queries(TEXTS)
    got = OnnxQueryEncoder(tmp_path / "onnx").encode_queries(TEXTS)
    assert cosine_agreement(reference, got).min() >= 1 - FP32_MAX_COSINE_GAP


def test_bad_widths_and_decoders_are_refused(tiny, tmp_path):
    model = AutoModel.from_pretrained(tiny[0])
    full = model.config.intermediate_size
    for width in (0, full + 1):
        with pytest.raises(CareError, match=f"between 1 and {full}"):
            prune_ffn_in_place(model, width, neuron_importance(model, None))
    with pytest.raises(CareError, match="BERT-style encoder"):
        feed_forward_pairs(AutoModel.from_pretrained(tiny[1]))


def test_cli_cuts_and_narrows_in_one_command(tiny, tmp_path):
    from typer.testing import CliRunner

    from care.cli import app

    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n"
                               for i, t in enumerate(TEXTS)), encoding="utf-8")
    out = tmp_path / "p"
    result = CliRunner().invoke(app, ["model", "prune", str(tiny[0]), "--layers", "1", "--ffn-width", "8",
                                      "--importance-texts", str(queries), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "feed-forward width 8, importance on 2 texts" in result.output
    config = AutoConfig.from_pretrained(out)
    assert (config.num_hidden_layers, config.intermediate_size) == (1, 8)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".prune-")] == []  # the scratch cut is gone
    refused = CliRunner().invoke(app, ["model", "prune", str(tiny[0]), "--layers", "1", "--importance-texts",
                                       str(queries), "-o", str(tmp_path / "q")])
    assert refused.exit_code != 0 and "give --ffn-width too" in str(refused.exception)
