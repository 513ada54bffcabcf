"""Fast query encoding: an exported query encoder run with onnxruntime, behind the Encoder protocol.

An export folder (written by :func:`care.models.onnx_export.export_query_encoder`, ``care export-onnx``)
holds ``model.onnx`` (+ ``model.int8.onnx``), the tokenizer and ``onnx_config.json``, which records how
texts become model inputs (prompts, instruction template, max length) so that
:class:`OnnxQueryEncoder` gives the same vectors as the PyTorch encoder. ``onnx:FOLDER`` model specs
load it (:func:`load_onnx_spec`).

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from care.config import Config, build
from care.encoders.base import format_instruction
from care.encoders.fingerprint import digest, file_identity
from care.encoders.hf import DEFAULT_INSTRUCTION_TEMPLATE
from care.encoders.token_feeds import TokenFeeds
from care.encoders.vectors import empty_embeddings, l2_normalize
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
        return build(cls, data, source=source, hint="re-export with 'care export-onnx'")


@dataclass
class OnnxSpecOptions(Config):
    """Options of an ``onnx:FOLDER`` model spec (see :class:`OnnxQueryEncoder`)."""

    PARSE_STRINGS = True
    KEY_NOUN = "option"

    int8: bool = False
    threads: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE


def load_onnx_spec(folder: str, options: dict[str, Any], *, source: str) -> OnnxQueryEncoder:
    """The encoder an ``onnx:FOLDER?int8=true&threads=1`` spec names (options converted and checked)."""
    settings = OnnxSpecOptions.from_dict(options, source=source)
    return OnnxQueryEncoder(folder, int8=settings.int8, threads=settings.threads, batch_size=settings.batch_size)


class OnnxQueryEncoder:
    """The exported query encoder on onnxruntime, behind the :class:`~care.encoders.base.Encoder` protocol.

    Only the query role exists: :meth:`encode_documents` raises :class:`CareError`.

    Args:
        folder: an export folder written by :func:`care.models.onnx_export.export_query_encoder`.
        int8: run ``model.int8.onnx`` instead of ``model.onnx``.
        threads: onnxruntime intra-op threads (0 = onnxruntime's default).
        batch_size: default batch size.
        direct_tokenizer: build the graph's inputs with the Rust tokenizer directly where it gives the same ones
            (:class:`~care.encoders.token_feeds.TokenFeeds`); False keeps the ``transformers`` call.
    """

    def __init__(self, folder: str | Path, *, int8: bool = False, threads: int = 0, batch_size: int = DEFAULT_BATCH_SIZE,
                 direct_tokenizer: bool = True) -> None:
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
        self._feeds = TokenFeeds(self._tokenizer, self.config.max_seq_length, self.config.input_names,
                                 allow_direct=direct_tokenizer)
        self.int8 = int8
        self.threads = threads
        self.batch_size = batch_size
        self.name = f"{Path(self.config.source).name}[onnx{'-int8' if int8 else ''}]"
        self._fingerprint = digest({"kind": "onnx", "model": file_identity(model_path), "config": self.config.to_dict()})

    @staticmethod
    def _warn_if_not_portable(model_path: Path) -> None:
        """Log a warning for an int8 file whose weights can saturate AVX2's int16 pair sums (an export
        made before issue 18): its vectors then depend on the CPU."""
        from care.encoders.int8_portability import MAX_PORTABLE_INT8, int8_weight_violations

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
        return l2_normalize(out[0] if len(out) == 1 else np.concatenate(out))

    def feeds(self, prepared: list[str]) -> dict[str, np.ndarray]:
        """The graph's inputs for texts that already carry their prompt / instruction (one padded batch; the Rust
        tokenizer called directly where it gives the same inputs, :mod:`care.encoders.token_feeds`)."""
        return self._feeds(prepared)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        raise CareError("an ONNX export holds only the query encoder; encode documents with the PyTorch model")


def cosine_agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two embedding matrices."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)
