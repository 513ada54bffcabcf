"""Fast query encoding: export the query encoder to ONNX and run it with onnxruntime.

:func:`export_query_encoder` traces the query side's whole sentence-transformers pipeline —
Transformer, Pooling (CLS / mean / last token), optional Dense, Normalize — with
``torch.onnx.export`` into ``model.onnx`` (dynamic batch and sequence axes), saves the tokenizer
beside it, and optionally writes ``model.int8.onnx`` with onnxruntime's dynamic int8 quantisation
(``quantize_dynamic``: 7-bit int8 weights with one scale per output channel, activations quantised on
the fly; the 7-bit range keeps the result identical on CPUs with and without VNNI, see
:data:`INT8_OPTIONS` and :mod:`care.serve.int8_portability`). ``onnx_config.json`` records
how texts become model inputs (prompts, instruction template, max length) so that
:class:`OnnxQueryEncoder` gives the same vectors as the PyTorch encoder.

Measured agreement (``tests/serve/test_onnx.py``): fp32 ONNX vs PyTorch cosine >= 1 - 1e-4 per row;
int8 vs PyTorch cosine >= INT8_MIN_COSINE (0.95) per row on the tiny random test model, on this CPU and
under emulated AVX2 arithmetic (``tests/serve/test_int8_portability.py``) — real trained encoders
usually agree better (>= 0.99), check yours with ``care export-onnx --check``.

Install with ``pip install 'care-retrieval[onnx]'`` (onnx, onnxruntime, onnxscript).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from care.data.io import write_json
from care.encoders.base import format_instruction
from care.encoders.fingerprint import digest, file_identity
from care.encoders.hf import DEFAULT_INSTRUCTION_TEMPLATE
from care.encoders.vectors import empty_embeddings, truncate_and_normalize
from care.errors import CareError

logger = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
CONFIG_FILE = "onnx_config.json"
TOKENIZER_DIR = "tokenizer"
DEFAULT_OPSET = 18
#: Cosine agreement guaranteed by the tests (fp32: 1 - FP32_MAX_COSINE_GAP; int8: INT8_MIN_COSINE).
FP32_MAX_COSINE_GAP = 1e-4
INT8_MIN_COSINE = 0.95
DEFAULT_BATCH_SIZE = 32
SAMPLE_TEXT = "头痛发热怎么办"


@dataclass
class OnnxExportConfig:
    """What :class:`OnnxQueryEncoder` needs to reproduce the PyTorch query encoder (``onnx_config.json``).

    Attributes:
        source: the model spec that was exported.
        source_fingerprint: fingerprint of the PyTorch query encoder.
        dim: output width.
        max_seq_length: truncation length in tokens.
        input_names: the graph's inputs (``input_ids``, ``attention_mask``, maybe ``token_type_ids``).
        query_prompt: prefix used when no instruction is given (the model's stored query prompt).
        instruction_template: how a task instruction is applied.
        instructions: ``False``: task instructions are ignored (the source spec said ``instructions=false``).
        quantized: True when ``model.int8.onnx`` exists.
    """

    source: str
    source_fingerprint: str
    dim: int
    max_seq_length: int
    input_names: list[str]
    query_prompt: str = ""
    instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE
    instructions: bool = True
    quantized: bool = False
    opset: int = DEFAULT_OPSET
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = CONFIG_FILE) -> OnnxExportConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        if set(data) - known:
            raise CareError(f"{source}: unknown field(s) {sorted(set(data) - known)}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise CareError(f"{source}: incomplete ONNX config ({exc}); re-export with 'care export-onnx'") from None


def _effective_query_prompt(model: Any) -> str:
    """The prompt ``SentenceTransformer.encode_query`` applies when given none (``query`` prompt, else the default)."""
    prompts = dict(getattr(model, "prompts", {}) or {})
    if "query" in prompts:
        return prompts["query"]
    default = getattr(model, "default_prompt_name", None)
    return prompts.get(default, "") if default else ""


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
        CareError: not a Hugging Face model, or onnx / onnxruntime missing.
    """
    import torch

    from care.encoders.hf import HFEncoder
    from care.index.sides import load_side

    encoder = load_side(spec, "query", device="cpu", dtype="float32")
    if not isinstance(encoder, HFEncoder):
        raise CareError(f"'{spec}' is not a Hugging Face / sentence-transformers model; only those export to ONNX")
    st_model = encoder.model
    if max_seq_length is not None:
        st_model.max_seq_length = max_seq_length
    tokenizer = st_model.tokenizer
    output = Path(output)
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
                      else _effective_query_prompt(st_model)),
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
#:   ``care.serve.int8_portability``). It costs nDCG@10 0.2575 vs 0.2599 at unchanged speed.
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


@dataclass
class OnnxSpecOptions:
    """Options of an ``onnx:FOLDER`` model spec (see :class:`OnnxQueryEncoder`)."""

    int8: bool = False
    threads: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE


def load_onnx_spec(folder: str, options: dict[str, Any], *, source: str) -> OnnxQueryEncoder:
    """The encoder an ``onnx:FOLDER?int8=true&threads=1`` spec names (options converted and checked)."""
    from care.encoders.options import config_from_options

    settings = config_from_options(OnnxSpecOptions, options, source=source)
    return OnnxQueryEncoder(folder, int8=settings.int8, threads=settings.threads, batch_size=settings.batch_size)


class OnnxQueryEncoder:
    """The exported query encoder on onnxruntime, behind the :class:`~care.encoders.base.Encoder` protocol.

    Only the query role exists: :meth:`encode_documents` raises :class:`CareError`.

    Args:
        folder: an export folder written by :func:`export_query_encoder`.
        int8: run ``model.int8.onnx`` instead of ``model.onnx``.
        threads: onnxruntime intra-op threads (0 = onnxruntime's default).
        batch_size: default batch size.
    """

    def __init__(self, folder: str | Path, *, int8: bool = False, threads: int = 0, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise CareError("ONNX inference needs onnxruntime: pip install 'care-retrieval[onnx]'") from exc
        from transformers import AutoTokenizer

        self.folder = Path(folder)
        config_path = self.folder / CONFIG_FILE
        if not config_path.is_file():
            raise CareError(f"{self.folder} is not an ONNX export ({CONFIG_FILE} missing); create one with 'care export-onnx'")
        try:
            self.config = OnnxExportConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")), source=str(config_path))
        except json.JSONDecodeError as exc:
            raise CareError(f"{config_path}: corrupt JSON ({exc.msg}); re-export with 'care export-onnx'") from None
        model_path = self.folder / (INT8_FILE if int8 else ONNX_FILE)
        if not model_path.is_file():
            hint = "re-export without --no-quantize" if int8 else "re-export with 'care export-onnx'"
            raise CareError(f"{model_path} is missing; {hint}")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for corrupt files
            raise CareError(f"{model_path} cannot be loaded by onnxruntime ({exc}); re-export it") from None
        if int8 and self.config.extra.get("int8_options", {}).get("reduce_range") is not True:
            self._warn_if_not_portable(model_path)
        self._tokenizer = AutoTokenizer.from_pretrained(str(self.folder / TOKENIZER_DIR))
        self.int8 = int8
        self.threads = threads
        self.batch_size = batch_size
        self.name = f"{Path(self.config.source).name}[onnx{'-int8' if int8 else ''}]"
        self._fingerprint = digest({"kind": "onnx", "model": file_identity(model_path), "config": self.config.to_dict()})

    @staticmethod
    def _warn_if_not_portable(model_path: Path) -> None:
        """Log a warning for an int8 file whose weights can saturate AVX2's int16 pair sums (an export
        made before issue 18): its vectors then depend on the CPU."""
        from care.serve.int8_portability import MAX_PORTABLE_INT8, int8_weight_violations

        violations = int8_weight_violations(model_path)
        if violations:
            logger.warning("%s: %d int8 weight tensors exceed +-%d; on x86 CPUs without VNNI their products saturate "
                           "and the vectors differ from this machine's -- re-export with 'care export-onnx'",
                           model_path, len(violations), MAX_PORTABLE_INT8)

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self.config.dim

    def _prepare(self, texts: list[str], instruction: str | None) -> list[str]:
        if instruction:
            return [format_instruction(instruction, text, self.config.instruction_template) for text in texts]
        return [self.config.query_prompt + text for text in texts]

    def encode_queries(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        batch_size: int | None = None,
        show_progress: bool = False,
        prompt: str | None = None,
    ) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows; ``prompt`` (e.g. ``""``) replaces the stored query prompt."""
        texts = list(texts)
        if not texts:
            return empty_embeddings(self.dim)
        if not self.config.instructions:
            instruction = None
        prepared = [prompt + t for t in texts] if prompt is not None and not instruction else self._prepare(texts, instruction)
        size = batch_size or self.batch_size
        out = [self._session.run(None, self.feeds(prepared[start : start + size]))[0]
               for start in range(0, len(prepared), size)]
        return truncate_and_normalize(np.concatenate(out).astype(np.float32), None)

    def feeds(self, prepared: list[str]) -> dict[str, np.ndarray]:
        """The graph's inputs for texts that already carry their prompt / instruction (one padded batch)."""
        batch = self._tokenizer(prepared, padding=True, truncation=True, max_length=self.config.max_seq_length,
                                return_tensors="np")
        return {name: np.asarray(batch[name], dtype=np.int64) for name in self.config.input_names}

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        raise CareError("an ONNX export holds only the query encoder; encode documents with the PyTorch model")


def cosine_agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two embedding matrices."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)
