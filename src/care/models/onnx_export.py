"""Export a query encoder to ONNX (``care export-onnx``), optionally with dynamic int8 weights.

:func:`export_query_encoder` traces the query side's whole sentence-transformers pipeline —
Transformer, Pooling (CLS / mean / last token), optional Dense, Normalize — with
``torch.onnx.export`` into ``model.onnx`` (dynamic batch and sequence axes), saves the tokenizer
beside it, and optionally writes ``model.int8.onnx`` with onnxruntime's dynamic int8 quantisation
(``quantize_dynamic``: int8 weights with one scale per output channel, activations quantised on
the fly). ``onnx_config.json`` (:class:`care.encoders.onnx.OnnxExportConfig`) records how texts become
model inputs, so :class:`care.encoders.onnx.OnnxQueryEncoder` gives the same vectors as PyTorch.

Install with ``pip install 'care-retrieval[onnx]'`` (onnx, onnxruntime, onnxscript).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from care.data.io import require_folder_path, write_json
from care.encoders.onnx import CONFIG_FILE, DEFAULT_OPSET, INT8_FILE, ONNX_FILE, TOKENIZER_DIR, OnnxExportConfig
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Texts traced through the model to fix the graph's input names and shapes.
SAMPLE_TEXT = "头痛发热怎么办"


def effective_query_prompt(model: Any) -> str:
    """The prompt ``SentenceTransformer.encode_query`` applies when given none (``query`` prompt, else the default)."""
    prompts = dict(getattr(model, "prompts", {}) or {})
    if "query" in prompts:
        return prompts["query"]
    default = getattr(model, "default_prompt_name", None)
    return prompts.get(default, "") if default else ""


def _max_positions(st_model: Any) -> int | None:
    """The number of positions of a sentence-transformers model's first (Transformer) module, when it has
    absolute position embeddings (``max_position_embeddings``); None otherwise."""
    config = getattr(getattr(st_model[0], "auto_model", None), "config", None)
    positions = getattr(config, "max_position_embeddings", None)
    return int(positions) if isinstance(positions, int) and positions > 0 else None


class _Pipeline:
    """Wraps a sentence-transformers model as ``forward(input_ids, attention_mask[, token_type_ids]) -> embedding``."""

    def __new__(cls, st_model: Any, input_names: list[str]) -> Any:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = st_model

            def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
                features = dict(zip(input_names, inputs))
                return self.model(features)["sentence_embedding"]

        return Wrapped().eval()


def export_query_encoder(
    spec: str,
    output: str | Path,
    *,
    quantize: bool = True,
    opset: int = DEFAULT_OPSET,
    max_seq_length: int | None = None,
) -> OnnxExportConfig:
    """Export the query side of ``spec`` (a CARE folder loads only its query route) to ``output``.

    Args:
        spec: model spec of a Hugging Face / sentence-transformers model or CARE folder.
        output: folder for ``model.onnx`` (+ ``model.int8.onnx``), the tokenizer and ``onnx_config.json``.
        quantize: also write the int8 dynamically quantised model.
        opset: ONNX opset.
        max_seq_length: override the model's truncation length.
    Returns:
        The written :class:`OnnxExportConfig`.
    Raises:
        CareError: not a Hugging Face model, onnx / onnxruntime missing, ``output`` an existing file, or a
            ``max_seq_length`` below 1 or beyond the model's position embeddings (the export would not
            truncate, or would index past its positions, and fail on the first long query it serves).
    """
    import torch

    from care.encoders.hf import HFEncoder
    from care.encoders.sides import load_side

    output = require_folder_path(output, "--output", "give a folder for the ONNX export")
    if max_seq_length is not None and max_seq_length < 1:
        raise CareError(f"--max-seq-length must be at least 1 token, got {max_seq_length}; leave it out to keep "
                        "the model's own truncation length")
    encoder = load_side(spec, "query", device="cpu", dtype="float32")
    if not isinstance(encoder, HFEncoder):
        raise CareError(f"'{spec}' is not a Hugging Face / sentence-transformers model; only those export to ONNX")
    st_model = encoder.model
    if max_seq_length is not None:
        positions = _max_positions(st_model)
        if positions is not None and max_seq_length > positions:
            raise CareError(f"--max-seq-length {max_seq_length} is longer than the {positions} positions of '{spec}'; "
                            f"give at most {positions}, or leave it out to keep the model's own truncation length")
        st_model.max_seq_length = max_seq_length
    tokenizer = st_model.tokenizer
    output.mkdir(parents=True, exist_ok=True)
    sample = tokenizer([SAMPLE_TEXT, SAMPLE_TEXT + SAMPLE_TEXT], padding=True, return_tensors="pt")
    input_names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in sample]
    wrapped = _Pipeline(st_model, input_names)
    axes = {name: {0: "batch", 1: "sequence"} for name in input_names}
    axes["sentence_embedding"] = {0: "batch"}
    tmp = output / f".{ONNX_FILE}.tmp"
    with torch.no_grad():
        torch.onnx.export(
            wrapped, tuple(sample[name] for name in input_names), str(tmp), input_names=input_names,
            output_names=["sentence_embedding"], dynamic_axes=axes, opset_version=opset, dynamo=False,
        )
    os.replace(tmp, output / ONNX_FILE)
    tokenizer.save_pretrained(str(output / TOKENIZER_DIR))
    if quantize:
        quantize_int8(output / ONNX_FILE, output / INT8_FILE)
    config = OnnxExportConfig(
        source=spec, source_fingerprint=encoder.fingerprint, dim=encoder.dim,
        max_seq_length=int(st_model.max_seq_length), input_names=input_names,
        query_prompt=(encoder.config.query_prefix if encoder.config.query_prefix is not None
                      else effective_query_prompt(st_model)),
        instruction_template=encoder.config.instruction_template,
        instructions=encoder.config.instructions,
        quantized=quantize, opset=opset, extra={"int8_options": dict(INT8_OPTIONS)} if quantize else {},
    )
    write_json(output / CONFIG_FILE, config.to_dict())
    logger.info("exported the query encoder of %s to %s (%d-d%s)", spec, output, config.dim, ", + int8" if quantize else "")
    return config


#: Options of ``quantize_dynamic``, chosen on multilingual-e5-small's 12 layers over the dev set
#: (``benchmarks/quantization.py`` -> ``benchmarks/results/quantization/``):
#:
#: * per-channel weight scales (one per output column) keep retrieval quality: nDCG@10 0.2599 against
#:   0.2499 with onnxruntime's single scale per tensor (fp32: 0.2612);
#: * 7-bit weights (``reduce_range``) make the result the same on every x86 CPU: on CPUs without VNNI
#:   (AVX2, AVX-512 without VNNI) onnxruntime adds pairs of u8 x s8 products in a saturating int16, which
#:   full 8-bit weights overflow (issue 18: the tiny test model's cosine to PyTorch fell to 0.867 on an
#:   AMD EPYC with AVX2 only; e5's minimum fell from 0.9955 to 0.9826 under emulated AVX2 arithmetic,
#:   ``care.encoders.int8_portability``). It costs nDCG@10 0.2575 vs 0.2599 at unchanged speed.
#:   Unsigned weights (U8U8, ``weight_type="QUInt8"``) are portable too and scored 0.2624, but ran 22 %
#:   slower than s8 here and use 16-bit multiply-adds on AVX2: the speed is the point of int8, so 7-bit.
INT8_OPTIONS: dict[str, Any] = {"per_channel": True, "reduce_range": True}


def quantize_int8(source: Path, target: Path, **options: Any) -> None:
    """Dynamic int8 quantisation of the weights (``onnxruntime.quantization.quantize_dynamic``).

    ``options`` override :data:`INT8_OPTIONS` (e.g. ``per_channel=False``, ``op_types_to_quantize=["MatMul"]``,
    ``weight_type="QUInt8"``).
    """
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CareError("int8 quantisation needs onnxruntime: pip install 'care-retrieval[onnx]'") from exc
    tmp = target.with_name(f".{target.name}.tmp")
    settings = {"weight_type": QuantType.QInt8, **INT8_OPTIONS, **options}
    if isinstance(settings["weight_type"], str):  # "QInt8" / "QUInt8" from a JSON config
        settings["weight_type"] = QuantType[settings["weight_type"]]
    quantize_dynamic(str(source), str(tmp), **settings)
    os.replace(tmp, target)


#: Beside an export of :func:`export_query_once`: the spec and fingerprint of the model it was exported from.
SOURCE_FILE = "exported_from.json"


def export_query_once(spec: str, output: str | Path, *, quantize: bool = True) -> Path:
    """:func:`export_query_encoder` unless ``output`` already holds an export of this very model: its
    :data:`SOURCE_FILE` records the spec and the fingerprint of the folder it names (a model retrained in place is
    exported again, into a cleared folder). Returns ``output``."""
    import json
    import shutil

    from care.encoders.fingerprint import folder_fingerprint

    folder, out = Path(spec.split("?", 1)[0]), Path(output)
    source = {"spec": spec, "fingerprint": folder_fingerprint(folder) if folder.is_dir() else None,
              "quantize": quantize}
    if (out / SOURCE_FILE).is_file() and json.loads((out / SOURCE_FILE).read_text(encoding="utf-8")) == source:
        logger.info("%s already holds the export of %s; kept", out, spec)
        return out
    shutil.rmtree(out, ignore_errors=True)  # an export of an earlier model
    export_query_encoder(spec, out, quantize=quantize)
    write_json(out / SOURCE_FILE, source)
    return out
