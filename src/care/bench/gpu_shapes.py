"""The paper's shapes on one device, random weights (``benchmarks/bench_gpu_shapes.py``): the setting, the texts,
the towers and the document tower's encoding throughput.

A :class:`Setting` says where and at which shapes the benchmark runs: :func:`paper_setting` (a
gte-multilingual-base-shaped query tower and a Qwen3-4B-shaped document tower in bf16 on CUDA, LoRA r=32 on the
document tower in Stage II) or :func:`tiny_setting` (the tiny shapes on the CPU: the same code path in seconds).
:func:`shape_texts` gives the texts (a corpus's, else synthetic Chinese), :func:`build_towers` saves random towers
with character tokenizers trained on them, :func:`bench_encoding` times corpus encoding through
``care.encoders.registry.load_model`` (:func:`care.bench.encoding_throughput.document_encoding_throughput`). The
Stage II steps are :func:`care.train.recipes.stage2_timing.bench_stage2`, the report
:func:`care.bench.reports.gpu_shapes.report_lines`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from care.bench.encoding_throughput import document_encoding_throughput
from care.data.io import iter_jsonl

if TYPE_CHECKING:
    from care.models.presets import DecoderShape, EncoderShape

#: The record folder under ``benchmarks/results/``.
EXPERIMENT = "gpu_shapes"
#: Tokens a document of the paper's setting holds.
DOCUMENT_MAX_LENGTH = 512
#: LoRA of the paper's Stage II on the document tower (every projection of the Qwen3 blocks).
PAPER_LORA: dict[str, Any] = {"r": 32, "alpha": 64, "dropout": 0.05,
                              "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                 "down_proj"]}
#: The tiny setting's LoRA, batch, negatives and lengths (a CPU smoke run of the same path).
TINY_LORA: dict[str, Any] = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
TINY_DOCUMENT_MAX_LENGTH = 64
#: A synthetic document (repeated and cut) when no corpus is given.
SYNTHETIC_TEXT = "患者咳嗽发热三天，建议多喝水，注意休息，必要时到医院检查血常规。" * 4
SYNTHETIC_MIN_CHARS, SYNTHETIC_SPREAD = 60, 200


@dataclasses.dataclass(frozen=True)
class Setting:
    """Where and at which shapes the benchmark runs: the paper's shapes on a GPU, or the tiny ones on the CPU.

    Attributes:
        device / dtype: ``cuda`` / ``bfloat16`` or ``cpu`` / ``float32``.
        query_shape / document_shape: the towers' shapes (:mod:`care.models.presets`).
        document_max_length: tokens a document holds when encoded.
        stage2_overrides: typed ``(dotted key, value)`` changes of ``configs/care_paper/stage2.yaml`` beyond the
            models, data and step count.
    """

    device: str
    dtype: str
    query_shape: EncoderShape
    document_shape: DecoderShape
    document_max_length: int
    stage2_overrides: tuple[tuple[str, Any], ...]


def paper_setting() -> Setting:
    """The paper's shapes on CUDA in bf16 (Stage II: LoRA r=32 on the document tower)."""
    from care.models.presets import GTE_MULTILINGUAL_BASE, QWEN3_4B

    return Setting("cuda", "bfloat16", dataclasses.replace(GTE_MULTILINGUAL_BASE, max_position_embeddings=514),
                   QWEN3_4B, DOCUMENT_MAX_LENGTH, (("model.lora", PAPER_LORA),))


def tiny_setting() -> Setting:
    """The tiny shapes on the CPU in float32: batch 4, 3 negatives, GradCache chunks of 2, short texts."""
    from care.models.presets import TINY_BERT, TINY_QWEN3

    return Setting("cpu", "float32", TINY_BERT, TINY_QWEN3, TINY_DOCUMENT_MAX_LENGTH,
                   (("runtime.mixed_precision", "no"), ("runtime.cpu", True),
                    ("optim.batch_size", 4), ("optim.grad_cache_chunk_size", 2), ("data.n_negatives", 3),
                    ("model.query_max_seq_length", 32), ("model.document_max_seq_length", TINY_DOCUMENT_MAX_LENGTH),
                    ("model.lora", TINY_LORA)))


def shape_texts(data: Path | None, n: int) -> list[str]:
    """``n`` texts: the answers of ``data/corpus.jsonl`` (repeated as needed), else synthetic Chinese text."""
    if data is not None and (data / "corpus.jsonl").is_file():
        texts = [row["text"] for _, row in iter_jsonl(data / "corpus.jsonl")]
    else:
        texts = [SYNTHETIC_TEXT[: SYNTHETIC_MIN_CHARS + i % SYNTHETIC_SPREAD] for i in range(n)]
    return (texts * (n // len(texts) + 1))[:n]


def build_towers(texts: list[str], work: Path, setting: Setting) -> tuple[Path, Path, int]:
    """The setting's random query and document towers with character tokenizers, saved under ``work``.

    Returns the query folder, the document folder and the document tower's non-embedding parameter count.
    """
    import torch

    from care.models.presets import save_random_model

    out = []
    for shape in (setting.query_shape, setting.document_shape):
        target = work / shape.name
        model = save_random_model(shape, texts, target, dtype=getattr(torch, setting.dtype), device=setting.device)
        params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
        out.append((target, params))
        del model
        if setting.device == "cuda":
            torch.cuda.empty_cache()
    return out[0][0], out[1][0], out[1][1]


def bench_encoding(document_dir: Path, texts: list[str], batch_size: int, non_embedding_params: int,
                   setting: Setting) -> dict:
    """Encode ``texts`` with the document tower through ``care.encoders.registry.load_model`` (timed after a
    warm-up); the fields of :func:`~care.bench.encoding_throughput.document_encoding_throughput`."""
    return document_encoding_throughput(document_dir, texts, batch_size=batch_size,
                                        max_length=setting.document_max_length, dtype=setting.dtype,
                                        device=setting.device, shape=setting.document_shape,
                                        non_embedding_params=non_embedding_params)


def record_name(device: str, suffix: str = "") -> str:
    """The record's file name: the device's name without spaces or brackets, then ``_<suffix>`` when given."""
    return device.replace(" ", "_").replace("(", "").replace(")", "") + (f"_{suffix}" if suffix else "")
