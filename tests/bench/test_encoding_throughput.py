"""``care.bench.encoding_throughput``: the FLOP count by hand, the datasheet lookup, and a CPU measurement."""

from __future__ import annotations

from care.bench.encoding_throughput import (
    datasheet_peak_tflops,
    decoder_forward_flops,
    document_encoding_throughput,
    measured_matmul_tflops,
)
from care.models.presets import QWEN3_4B, TINY_QWEN3, save_random_model


def test_forward_flops_counts_projections_and_full_attention():
    # 2 x params x tokens, plus 4 x layers x n^2 x (heads x head_dim) per document
    flops = decoder_forward_flops(1000, [10, 20], QWEN3_4B)
    attention = 4 * 36 * (10 ** 2 + 20 ** 2) * (32 * 128)
    assert flops == 2 * 1000 * 30 + attention


def test_datasheet_peaks_are_found_by_device_name():
    assert datasheet_peak_tflops("NVIDIA H200") == 989.4 and datasheet_peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert datasheet_peak_tflops("NVIDIA GeForce RTX 4090") is None


def test_a_tiny_document_tower_is_timed_on_the_cpu(tmp_path):
    texts = [f"患者咳嗽发热第{i}天，注意休息" for i in range(12)]
    model = save_random_model(TINY_QWEN3, texts, tmp_path / "doc")
    params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    row = document_encoding_throughput(tmp_path / "doc", texts, batch_size=4, max_length=8, dtype="float32",
                                       device="cpu", shape=TINY_QWEN3, non_embedding_params=params)
    assert row["documents"] == 12 and row["tokens"] == 12 * 8  # every text is longer than max_length
    assert row["dim"] == TINY_QWEN3.hidden_size and row["peak_memory_gib"] is None
    assert row["model_tflops"] == decoder_forward_flops(params, [8] * 12, TINY_QWEN3) / row["seconds"] / 1e12
    assert measured_matmul_tflops("cpu", "float32", 64) > 0
