"""What an LLM document tower would cost online: a decoder shape (e.g. Qwen3-4B / 8B) with random weights,
measured with a few layers and scaled linearly to its full depth.

The symmetric alternative to CARE encodes queries with the document tower; this measures that cost
without downloading weights. Only the per-layer cost is scaled: it dominates, while the embedding lookup
(a gather; the vocabulary is cut to :data:`VOCAB_CUT` entries to keep fp32 memory small) and the final
norm are negligible. Each call encodes left-padded random token ids of the given lengths and pools the
last token, as the document route does. Batch-1 latency goes through :func:`care.bench.latency.measure_calls`;
a batch's time is :func:`care.bench.batch_timing.median_call_seconds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from care.bench.batch_timing import median_call_seconds
from care.bench.latency import LatencySettings, measure_calls
from care.models.presets import DecoderShape, build_random_model

#: Vocabulary entries of the random towers (embedding lookups cost nothing measurable).
VOCAB_CUT = 1000


@dataclass(frozen=True)
class DecoderTowerSpeed:
    """One decoder shape's cost, scaled from ``measured_layers`` to ``scaled_to_layers``.

    Attributes:
        latency_s: batch-1 median latency (one text per call).
        batch_s: median time of one call over the whole batch.
    """

    shape: str
    latency_s: float
    batch_s: float
    measured_layers: int
    scaled_to_layers: int


def last_token_encode(model: torch.nn.Module, lengths: Sequence[int], vocab_size: int = VOCAB_CUT) -> torch.Tensor:
    """Encode one batch of random token ids of ``lengths`` (left padding) and return the L2-normalised
    last-token states."""
    width = max(lengths)
    ids = torch.randint(0, vocab_size, (len(lengths), width))
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        mask[i, width - n :] = 1  # left padding, last-token pooling reads position -1
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]
        return torch.nn.functional.normalize(out, dim=-1)


def decoder_tower_speed(
    shape: DecoderShape,
    single_lengths: Sequence[int],
    batch_lengths: Sequence[int],
    *,
    layers: int,
    depth: int,
    calls: int,
    settings: LatencySettings,
    repeats: int,
) -> DecoderTowerSpeed:
    """Time ``shape`` (fp32, random weights, ``layers`` layers) and scale to ``depth`` layers.

    Args:
        single_lengths: token lengths of the batch-1 calls (the first ``calls`` are timed).
        batch_lengths: token lengths of the one batch timed for throughput.
        layers: layers actually built and run.
        depth: layers the result is scaled to (the shape's real depth).
        calls: inputs of the batch-1 measurement.
        settings: the batch-1 latency settings.
        repeats: timed calls of the batch.
    """
    model = build_random_model(shape, dtype=torch.float32, num_hidden_layers=layers, vocab_size=VOCAB_CUT)
    scale = depth / layers
    report = measure_calls({shape.name: lambda i: last_token_encode(model, [single_lengths[i]])}, calls,
                           settings=settings)
    latency = report.models[shape.name].p50_ms / 1000 * scale
    batch = median_call_seconds(lambda: last_token_encode(model, batch_lengths), repeats) * scale
    return DecoderTowerSpeed(shape.name, latency, batch, layers, depth)
