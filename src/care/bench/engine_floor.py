"""An engine's fixed per-call cost, measured: a trivially small graph timed beside the models (issue 63).

A model is "overhead-dominated" when its single-query time is the engine's fixed per-call cost (tokeniser, the
session call, pooling) rather than its own work. That cost is measured here, not inferred from how a call grows with
4x the text (a 12-layer tower at short queries streams its weights once per call and barely grows with the text,
yet its 24 ms are its layers'): :func:`floor_encoder` builds a BERT with **no transformer layer** and
:data:`FLOOR_WIDTH` dimensions around the reference model's tokenizer, with the reference's prompt, instruction
template and truncation, loaded in the same engine (ONNX int8 on onnxruntime, or PyTorch fp32). Its time is what
every call in that engine costs before a model does anything; :func:`care.bench.latency.measure_latency` times it
interleaved with the models (``floor=``) and calls a model overhead-dominated only when its median is within the
self-check's tolerance of the floor's (:func:`care.bench.latency.classify_by_floor`).

Example::

    floor = floor_encoder(reference_onnx_encoder, "onnx-int8", run / "eval" / "latency_floor")
    report = measure_latency(models, queries, floor=floor, control=...)
    report.floor.p50_ms      # the engine's fixed cost per call (ms)
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from care.data.io import write_json
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Width of the floor graph: as small as a BERT config allows with one attention head (the graph does nothing).
FLOOR_WIDTH = 8
#: The engines a floor is built for (the names :mod:`care.bench.depth_latency` uses).
ONNX_INT8, PYTORCH = "onnx-int8", "pytorch"
#: Threads of the floor's engine: one, as every engine in the latency step runs.
THREADS = 1


@dataclasses.dataclass(frozen=True)
class TextSettings:
    """How an encoder turns a query into tokens (what the floor copies so its tokeniser does the same work).

    Attributes:
        tokenizer: a loaded tokenizer (``save_pretrained`` is called on it).
        max_length: truncation length in tokens.
        query_prompt: text put before every query without an instruction.
        instruction_template: how a task instruction is applied.
        instructions: ``False``: instructions are ignored.
    """

    tokenizer: Any
    max_length: int
    query_prompt: str
    instruction_template: str
    instructions: bool


def text_settings(encoder: Any) -> TextSettings:
    """The :class:`TextSettings` of an ONNX export (:class:`~care.encoders.onnx.OnnxQueryEncoder`) or a PyTorch
    query side (:class:`~care.encoders.hf.HFEncoder`).

    Raises:
        CareError: any other encoder (its engine has no floor graph here).
    """
    from care.encoders.hf import HFEncoder
    from care.encoders.onnx import TOKENIZER_DIR, OnnxQueryEncoder

    if isinstance(encoder, OnnxQueryEncoder):
        from transformers import AutoTokenizer

        config = encoder.config
        return TextSettings(AutoTokenizer.from_pretrained(str(encoder.folder / TOKENIZER_DIR)), config.max_seq_length,
                            config.query_prompt, config.instruction_template, config.instructions)
    if isinstance(encoder, HFEncoder):
        from care.models.onnx_export import effective_query_prompt

        config = encoder.config
        prompt = config.query_prefix if config.query_prefix is not None else effective_query_prompt(encoder.model)
        return TextSettings(encoder.model.tokenizer, int(encoder.model.max_seq_length), prompt,
                            config.instruction_template, config.instructions)
    raise CareError(f"no floor graph for {type(encoder).__name__}: the engine floor is built for ONNX exports and "
                    "PyTorch (Hugging Face) query sides")


def _floor_folder(settings: TextSettings, folder: Path) -> Path:
    """A plain HF folder: a BERT with no layer, :data:`FLOOR_WIDTH` wide, around ``settings.tokenizer``."""
    from transformers import BertConfig, BertModel

    from care.models.folders import atomic_dir

    config = BertConfig(vocab_size=len(settings.tokenizer), hidden_size=FLOOR_WIDTH, num_hidden_layers=0,
                        num_attention_heads=1, intermediate_size=FLOOR_WIDTH,
                        max_position_embeddings=max(settings.max_length, 1))
    with atomic_dir(folder) as tmp:
        BertModel(config).save_pretrained(tmp)  # with its pooler: loading it warns of nothing missing
        settings.tokenizer.save_pretrained(tmp)
    return folder


def floor_encoder(reference: Any, engine: str, folder: str | Path) -> Any:
    """The engine's floor graph, tokenising as ``reference`` does, loaded in ``engine`` on one thread.

    Args:
        reference: the encoder whose tokenizer, prompt and truncation the floor copies (:func:`text_settings`).
        engine: ``onnx-int8`` (exported with int8 weights, run on onnxruntime) or ``pytorch`` (fp32 on CPU).
        folder: scratch folder for the floor (``<folder>/model`` and, for ONNX, ``<folder>/onnx``); rebuilt each time.
    Returns:
        An encoder with ``encode_queries`` (an :class:`~care.encoders.onnx.OnnxQueryEncoder` or
        :class:`~care.encoders.hf.HFEncoder`).
    Raises:
        CareError: an unknown engine, or a reference with no floor (:func:`text_settings`).
    """
    import shutil

    if engine not in (ONNX_INT8, PYTORCH):
        raise CareError(f"unknown latency engine {engine!r}; choose from {ONNX_INT8}, {PYTORCH}")
    settings = text_settings(reference)
    folder = Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    model = _floor_folder(settings, folder / "model")
    if engine == PYTORCH:
        from care.encoders.hf import HFEncoder, HFEncoderConfig

        return HFEncoder.from_config(HFEncoderConfig(
            model=str(model), name="engine floor", pooling="cls", max_length=settings.max_length, dtype="float32",
            device="cpu", query_prefix=settings.query_prompt, instruction_template=settings.instruction_template,
            instructions=settings.instructions))
    from care.encoders.onnx import CONFIG_FILE, ONNX_FILE, OnnxQueryEncoder
    from care.models.onnx_export import export_query_encoder

    out = folder / "onnx"
    config = export_query_encoder(f"{model}?pooling=cls", out, quantize=True, max_seq_length=settings.max_length)
    config = dataclasses.replace(config, query_prompt=settings.query_prompt,
                                 instruction_template=settings.instruction_template,
                                 instructions=settings.instructions)
    write_json(out / CONFIG_FILE, config.to_dict())
    (out / ONNX_FILE).unlink(missing_ok=True)  # only the int8 graph is timed
    logger.debug("engine floor for %s: %s", engine, json.dumps(config.to_dict(), ensure_ascii=False))
    return OnnxQueryEncoder(out, int8=True, threads=THREADS)
