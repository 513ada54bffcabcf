"""A static query tower served as what it is: a lookup. Rust tokenizer, a gather, a mean, an L2 norm — no graph.

A static tower (sentence-transformers' ``StaticEmbedding``, built and trained by :mod:`care.models.static_tower`)
embeds a text as the mean of one learned row per token (LightRetriever's query side, arXiv 2505.12260)::

    q = normalize( (1 / n) * sum_{i=1..n} E[t_i] )          t_1..t_n = tokenizer(prefix + text), no special tokens

(per-token weights w_t, learned or IDF, are folded into the rows, ``E[t] = w_t * E0[t]``: the weighted mean
``sum w_i E0[t_i] / sum w_i`` differs from the mean above by a positive scalar per text, which the L2 norm removes).
:class:`StaticQueryEncoder` computes it with the ``tokenizers`` Rust tokenizer and numpy (or, ``backend=onnxruntime``,
a two-node Gather + ReduceMean graph, kept for the side-by-side timing that chose numpy:
``benchmarks/results/frontier/static_tower.json``), so ``care serve``, ``care bench`` and ``care run``'s latency
step answer a query without loading torch.

It reads any folder holding such a tower: a sentence-transformers folder whose first module is ``StaticEmbedding``
(both roles: a symmetric static model), or a CARE folder whose ``query`` route is one (query role only, like an ONNX
export). ``static:FOLDER`` model specs (:data:`care.encoders.registry.STATIC_PREFIX`) name it (:func:`load_static_spec`); :func:`care.encoders.sides.load_side`
picks it for the query side of such a folder by itself. It is the depth-0 point of the query tower's frontier
(:data:`STATIC_DEPTH`).

The module folder's files are sentence-transformers' own: ``tokenizer.json`` and ``model.safetensors``
(``embedding.weight``, vocabulary x width, float32).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from care.config import Config
from care.encoders.base import format_instruction
from care.encoders.fingerprint import digest, file_identity
from care.encoders.hf import DEFAULT_INSTRUCTION_TEMPLATE
from care.encoders.vectors import empty_embeddings, l2_normalize
from care.errors import CareError

logger = logging.getLogger(__name__)

#: The query tower's depth on the frontier: no transformer layer.
STATIC_DEPTH = 0
#: The engine a lookup runs in (:data:`care.bench.latency.ENGINES`): it has no graph, so it is timed beside any engine.
LOOKUP_ENGINE = "lookup"
#: sentence-transformers' module class and its files.
STATIC_MODULE_SUFFIX = ".StaticEmbedding"
TOKENIZER_FILE = "tokenizer.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHT_KEY = "embedding.weight"
MODULES_FILE = "modules.json"
ROUTER_CONFIG = "router_config.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
QUERY_ROUTE, DOCUMENT_ROUTE = "query", "document"
Backend = Literal["numpy", "onnxruntime"]
BACKENDS: tuple[str, ...] = ("numpy", "onnxruntime")
DEFAULT_BATCH_SIZE = 256


@dataclass
class StaticSpecOptions(Config):
    """Options of a ``static:FOLDER`` model spec (see :class:`StaticQueryEncoder`)."""

    PARSE_STRINGS = True
    KEY_NOUN = "option"

    backend: Backend = "numpy"
    query_prefix: str | None = None
    document_prefix: str | None = None
    instructions: bool | None = None
    instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE
    batch_size: int = DEFAULT_BATCH_SIZE
    name: str | None = None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CareError(f"{path}: unreadable ({exc}); save the model again") from None


@dataclass(frozen=True)
class StaticLocation:
    """Where a folder keeps its static tower: ``module`` (the StaticEmbedding folder) and whether it is only the
    query route of a routed (CARE) folder."""

    folder: Path
    module: Path
    query_only: bool


def find_static_module(folder: str | Path) -> StaticLocation | None:
    """The static tower of ``folder`` (a sentence-transformers folder whose first module, or whose query route's
    first module, is ``StaticEmbedding``), or ``None`` for any other folder or spec."""
    root = Path(str(folder).split("?", 1)[0]).expanduser()
    modules_file = root / MODULES_FILE
    try:
        if not modules_file.is_file():
            return None
    except OSError:  # a hub id or a name too long for a path
        return None
    modules = _read_json(modules_file)
    if not modules:
        return None
    first = modules[0]
    kind = str(first.get("type", ""))
    if kind.endswith(STATIC_MODULE_SUFFIX):
        return StaticLocation(root, root / first.get("path", ""), query_only=False)
    if kind.endswith(".Router"):
        router_dir = root / first.get("path", "")
        config = _read_json(router_dir / ROUTER_CONFIG)
        route = config.get("structure", {}).get(QUERY_ROUTE) or []
        if route and str(config.get("types", {}).get(route[0], "")).endswith(STATIC_MODULE_SUFFIX):
            return StaticLocation(root, router_dir / route[0], query_only=True)
    return None


def is_static_tower(spec: str) -> bool:
    """True when ``spec`` (a folder, maybe with ``?options``) holds a static query tower."""
    return find_static_module(spec) is not None


def _stored_prompts(folder: Path) -> dict[str, Any]:
    """``query_prefix`` / ``document_prefix`` / ``instructions`` the folder was trained with: ``care_prompts.json``,
    else sentence-transformers' stored ``query`` / ``document`` prompts."""
    from care.encoders.stored_prompts import stored_prompt_options

    stored = stored_prompt_options(folder)
    if stored:
        return stored
    config = folder / ST_CONFIG_FILE
    prompts = (_read_json(config).get("prompts") or {}) if config.is_file() else {}
    return {key: prompts[role] for key, role in (("query_prefix", QUERY_ROUTE), ("document_prefix", DOCUMENT_ROUTE))
            if prompts.get(role)}


def lookup_mean(table: np.ndarray, ids: Sequence[Sequence[int]], weights: np.ndarray | None = None) -> np.ndarray:
    """The (weighted) mean of ``table``'s rows per text: ``sum_i w[t_i] E[t_i] / sum_i w[t_i]`` (``w`` = 1 without
    ``weights``); a text with no token (or zero total weight) gives a zero row. ``(len(ids), dim)`` float32, not
    normalised. The reference the torch module (:mod:`care.models.static_tower`) is tested against."""
    out = np.zeros((len(ids), table.shape[1]), dtype=np.float32)
    for row, tokens in enumerate(ids):
        if len(tokens) == 0:
            continue
        index = np.asarray(tokens, dtype=np.intp)
        if weights is None:
            out[row] = table[index].mean(axis=0)
            continue
        w = weights[index].astype(np.float32)
        total = float(w.sum())
        if total > 0:
            out[row] = (w @ table[index]) / total
    return out


class _OnnxLookup:
    """The same gather + mean as one onnxruntime graph (``Gather`` then ``ReduceMean``), one text per run."""

    def __init__(self, table: np.ndarray) -> None:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        graph = helper.make_graph(
            [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
             helper.make_node("ReduceMean", ["rows"], ["mean"], axes=[0], keepdims=1)],
            "static_lookup",
            [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
            [helper.make_tensor_value_info("mean", TensorProto.FLOAT, [1, table.shape[1]])],
            [numpy_helper.from_array(np.ascontiguousarray(table, dtype=np.float32), "table")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self._dim = table.shape[1]

    def __call__(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        out = np.zeros((len(ids), self._dim), dtype=np.float32)
        for row, tokens in enumerate(ids):
            if len(tokens):
                out[row] = self._session.run(None, {"ids": np.asarray(tokens, dtype=np.int64)})[0][0]
        return out


class StaticQueryEncoder:
    """A static tower behind the :class:`~care.encoders.base.Encoder` protocol, computed as a lookup (module docstring).

    Args:
        folder: a folder holding a static tower (:func:`find_static_module`).
        backend: ``numpy`` (default, the faster one measured) or ``onnxruntime``.
        query_prefix / document_prefix: text put before every query / document; ``None``: what the folder stores
            (``care_prompts.json``, else sentence-transformers' prompts).
        instructions: False ignores task instructions (the stored setting when ``None``; True when none is stored);
            with one, the query is ``instruction_template`` filled in instead of the prefix.
        batch_size: texts per call (only memory).
        name: display name.
    Raises:
        CareError: the folder holds no static tower, or its files are unreadable or inconsistent.
    """

    def __init__(self, folder: str | Path, *, backend: Backend = "numpy", query_prefix: str | None = None,
                 document_prefix: str | None = None, instructions: bool | None = None,
                 instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE, batch_size: int = DEFAULT_BATCH_SIZE,
                 name: str | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        location = find_static_module(folder)
        if location is None:
            raise CareError(f"{folder}: no static tower here (a sentence-transformers folder whose first module, or "
                            "whose query route's first module, is StaticEmbedding); build one with "
                            "care.models.static_tower")
        if backend not in BACKENDS:
            raise CareError(f"static tower backend {backend!r} is not one of {', '.join(BACKENDS)}")
        self.folder, self.location, self.backend = location.folder, location, backend
        weights_path, tokenizer_path = location.module / WEIGHTS_FILE, location.module / TOKENIZER_FILE
        for path in (weights_path, tokenizer_path):
            if not path.is_file():
                raise CareError(f"{path} is missing: the static tower's folder is incomplete; save it again")
        tensors = load_file(str(weights_path))
        if WEIGHT_KEY not in tensors:
            raise CareError(f"{weights_path} has no {WEIGHT_KEY!r} tensor (it holds {sorted(tensors)}); save the "
                            "tower with care.models.static_tower")
        self.table = np.ascontiguousarray(tensors[WEIGHT_KEY], dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.no_padding()
        if self._tokenizer.get_vocab_size() > self.table.shape[0]:
            raise CareError(f"{location.module}: the tokenizer has {self._tokenizer.get_vocab_size()} tokens but the "
                            f"table only {self.table.shape[0]} rows; save the tower again")
        stored = _stored_prompts(location.folder)
        self.query_prefix = stored.get("query_prefix", "") if query_prefix is None else query_prefix
        self.document_prefix = stored.get("document_prefix", "") if document_prefix is None else document_prefix
        self.instructions = bool(stored.get("instructions", True)) if instructions is None else instructions
        self.instruction_template = instruction_template
        self.batch_size = batch_size
        self.name = name or f"{location.folder.name}[static]"
        self._onnx = _OnnxLookup(self.table) if backend == "onnxruntime" else None
        self._fingerprint = digest({"kind": "static", "weights": file_identity(weights_path),
                                    "tokenizer": file_identity(tokenizer_path),
                                    "query_prefix": self.query_prefix, "document_prefix": self.document_prefix,
                                    "instructions": self.instructions, "template": instruction_template})

    @property
    def fingerprint(self) -> str:
        """Hash of the table's and tokenizer's identity and the prefixes (the backend computes the same vectors)."""
        return self._fingerprint

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each prepared text's token ids, as ``StaticEmbedding`` reads them (no special tokens)."""
        if len(texts) == 1:
            return [self._tokenizer.encode(texts[0], add_special_tokens=False).ids]
        return [e.ids for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def _embed(self, prepared: list[str]) -> np.ndarray:
        if not prepared:
            return empty_embeddings(self.dim)
        if len(prepared) == 1 and self._onnx is None:  # the served path: one query
            ids = self._tokenizer.encode(prepared[0], add_special_tokens=False).ids
            if not ids:
                return np.zeros((1, self.dim), dtype=np.float32)
            return l2_normalize(self.table[ids].mean(axis=0, keepdims=True))
        size = self.batch_size
        chunks = []
        for start in range(0, len(prepared), size):
            ids = self.token_ids(prepared[start : start + size])
            chunks.append(self._onnx(ids) if self._onnx is not None else lookup_mean(self.table, ids))
        return l2_normalize(np.concatenate(chunks))

    def encode_queries(self, texts: Sequence[str], *, instruction: str | None = None, batch_size: int | None = None,
                       show_progress: bool = False) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows: the prefix (or the filled instruction template) + text, looked up."""
        if instruction and self.instructions:
            prepared = [format_instruction(instruction, text, self.instruction_template) for text in texts]
        else:
            prepared = [self.query_prefix + text for text in texts]
        return self._embed(prepared)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int | None = None,
                         show_progress: bool = False) -> np.ndarray:
        """The document prefix + text, looked up; refused for a CARE folder's query route (its documents have their
        own tower)."""
        if self.location.query_only:
            raise CareError(f"{self.folder}: the static tower is this model's query route only; encode documents "
                            "with its document route (load_side(folder, 'document'))")
        return self._embed([self.document_prefix + text for text in texts])

    def __repr__(self) -> str:
        return f"StaticQueryEncoder({str(self.folder)!r}, dim={self.dim}, backend={self.backend!r})"


def load_static_spec(folder: str, options: dict[str, Any], *, source: str) -> StaticQueryEncoder:
    """The encoder a ``static:FOLDER?backend=numpy`` spec names (options converted and checked)."""
    settings = StaticSpecOptions.from_dict(options, source=source)
    return StaticQueryEncoder(folder, **settings.to_dict())
