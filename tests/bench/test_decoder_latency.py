"""An LLM document tower's online cost: left-padded last-token encoding, measured with few layers and scaled
to full depth."""

from __future__ import annotations

import pytest
import torch

from care.bench import decoder_latency
from care.bench.decoder_latency import VOCAB_CUT, decoder_tower_speed, last_token_encode
from care.bench.latency import LatencySettings
from care.models.presets import TINY_QWEN3, build_random_model

QUICK = LatencySettings(warmup_calls=1, min_calls=2, max_calls=2, overhead_calls=1)


def test_last_token_encoding_is_normalised_and_ignores_left_padding():
    model = build_random_model(TINY_QWEN3, dtype=torch.float32, num_hidden_layers=1, vocab_size=VOCAB_CUT)
    torch.manual_seed(0)
    out = last_token_encode(model, [3, 5])
    assert out.shape == (2, TINY_QWEN3.hidden_size)
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(2))


def test_the_speed_is_scaled_from_the_measured_layers_to_the_depth(monkeypatch):
    monkeypatch.setattr(decoder_latency, "median_call_seconds", lambda fn, repeats: (fn(), 0.5)[1])
    speed = decoder_tower_speed(TINY_QWEN3, [3, 4], [3, 4, 5], layers=1, depth=36, calls=2, settings=QUICK,
                                repeats=1)
    assert speed.shape == TINY_QWEN3.name and (speed.measured_layers, speed.scaled_to_layers) == (1, 36)
    assert speed.batch_s == pytest.approx(0.5 * 36) and speed.latency_s > 0
