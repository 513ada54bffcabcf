"""A document tower's encoding throughput on one device, against what the device itself can do.

:func:`document_encoding_throughput` encodes texts through the path ``care index build`` and ``care bench``
run (``care.encoders.registry.load_model`` -> ``encode_documents``: last-token pooling, EOS appended) and
reports documents/s, tokens/s and the achieved model FLOP rate (:func:`decoder_forward_flops`). The rate is
compared with a matrix product measured in the same run (:func:`measured_matmul_tflops`) and with the GPU's
datasheet peak (:func:`datasheet_peak_tflops`). :func:`fresh_peak_memory` and :func:`peak_memory_gib` bound
a phase's GPU memory (``None`` on the CPU), :func:`synchronize` waits for a GPU's queued work before a clock
is read.
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from care.models.presets import DecoderShape

logger = logging.getLogger(__name__)

#: bf16 dense tensor-core peaks from the datasheets (TFLOP/s), by device-name substring.
BF16_PEAK_TFLOPS = {"H200": 989.4, "H100 80GB HBM3": 989.4, "H100": 989.4, "A100": 312.0}
#: Side of the square matrix product :func:`measured_matmul_tflops` times on a GPU.
MATMUL_SIZE = 8192
GIB = 2**30


def datasheet_peak_tflops(device_name: str) -> float | None:
    """The bf16 dense peak of the GPU named ``device_name`` (``torch.cuda.get_device_name``), None if unknown."""
    return next((v for k, v in BF16_PEAK_TFLOPS.items() if k in device_name), None)


def synchronize(device: str) -> None:
    """Wait for the work queued on ``device`` (a no-op off CUDA), so a clock read after it counts that work."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def fresh_peak_memory(device: str) -> float | None:
    """Free what earlier phases left (their models must not count in this one's peak) and restart the peak
    count; returns the GiB still allocated on ``device`` (None off CUDA)."""
    import torch

    gc.collect()
    if device != "cuda":
        return None
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated() / GIB


def peak_memory_gib(device: str) -> float | None:
    """The most GiB allocated on ``device`` since :func:`fresh_peak_memory` (None off CUDA)."""
    import torch

    return torch.cuda.max_memory_allocated() / GIB if device == "cuda" else None


def measured_matmul_tflops(device: str, dtype: str, size: int = MATMUL_SIZE) -> float:
    """The rate of a ``size``-cubed matrix product in ``dtype`` (a ``torch`` name) on ``device`` (3 warm-ups,
    10 timed), TFLOP/s."""
    import torch

    torch_dtype = getattr(torch, dtype)
    a = torch.randn(size, size, device=device, dtype=torch_dtype)
    b = torch.randn(size, size, device=device, dtype=torch_dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    start, reps = time.perf_counter(), 10
    for _ in range(reps):
        a @ b
    synchronize(device)
    return 2 * size ** 3 * reps / (time.perf_counter() - start) / 1e12


def decoder_forward_flops(non_embedding_params: int, lengths: list[int], shape: DecoderShape) -> int:
    """Forward FLOPs of a decoder over documents of ``lengths`` tokens.

    2 per non-embedding parameter per token (the projections and MLP), plus attention's two score
    products, 4 * layers * n^2 * (heads * head_dim) per document of n tokens, counted in full although
    causal attention needs about half (the usual model-FLOP convention).
    """
    attention_width = shape.num_attention_heads * shape.head_dim
    tokens = sum(lengths)
    return 2 * non_embedding_params * tokens + sum(4 * shape.num_hidden_layers * n * n * attention_width for n in lengths)


def document_encoding_throughput(folder: Path, texts: list[str], *, batch_size: int, max_length: int, dtype: str,
                                 device: str, shape: DecoderShape, non_embedding_params: int) -> dict[str, Any]:
    """Encode ``texts`` with the decoder document tower in ``folder`` (last-token pooling, ``max_length`` tokens,
    ``dtype`` on ``device``) through ``care.encoders.registry.load_model``, timed after a warm-up batch.

    Returns:
        documents, tokens, seconds, documents_per_s, tokens_per_s, model_tflops (:func:`decoder_forward_flops`
        of ``shape`` per second), batch_size, max_length, dim, peak_memory_gib and memory_at_start_gib (None on
        the CPU).

    Raises:
        RuntimeError: the encoder returned another number of vectors than texts.
    """
    from care.encoders.registry import load_model

    at_start = fresh_peak_memory(device)  # an earlier batch size's encoder must not count in this one's peak
    encoder = load_model(f"{folder}?pooling=lasttoken&dtype={dtype}&max_length={max_length}"
                         f"&batch_size={batch_size}&device={device}")
    encoder.encode_documents(texts[:batch_size])  # warm-up: kernels, allocator
    tokenizer = encoder.model.tokenizer
    lengths = [min(len(ids), max_length) for ids in tokenizer(texts)["input_ids"]]
    synchronize(device)
    start = time.perf_counter()
    vectors = encoder.encode_documents(texts)
    synchronize(device)
    seconds = time.perf_counter() - start
    if len(vectors) != len(texts):
        raise RuntimeError(f"encoded {len(vectors)} vectors for {len(texts)} documents")
    tokens = sum(lengths)
    flops = decoder_forward_flops(non_embedding_params, lengths, shape)
    logger.info("encoded %d documents (%d tokens) in batches of %d: %.1f s", len(texts), tokens, batch_size, seconds)
    return {"documents": len(texts), "tokens": tokens, "seconds": seconds, "documents_per_s": len(texts) / seconds,
            "tokens_per_s": tokens / seconds, "model_tflops": flops / seconds / 1e12, "batch_size": batch_size,
            "max_length": max_length, "dim": int(vectors.shape[1]), "peak_memory_gib": peak_memory_gib(device),
            "memory_at_start_gib": at_start}
