"""The document tower: a decoder-only LLM with last-token (EOS) pooling, LoRA and a Matryoshka cut.

Pipeline of sentence-transformers modules::

    Transformer(decoder, AutoModel) -> Pooling("lasttoken") -> [Dense [I|0] cut] -> Normalize

* EOS: the tokenizer's post-processor appends the EOS token to every text (Qwen3-Embedding style),
  so the last real position — the one last-token pooling reads — is always the EOS state. Truncation
  keeps the EOS (the template's special tokens are reserved before cutting).
* Padding: ``left`` by default (Qwen3-Embedding's convention); sentence-transformers' last-token pooling
  finds the last real token from the attention mask, so right padding gives the same vectors.
* LoRA (:mod:`care.models.lora`): only adapter parameters train; the folder saves the adapter and
  loads back with ``SentenceTransformer(path)``; building from a folder that holds an adapter resumes it.
* Matryoshka (:mod:`care.models.matryoshka`): ``output_dim`` keeps the first N coordinates so the
  document vector has the query encoder's width.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

from care.errors import CareError
from care.models.folders import atomic_dir
from care.models.lora import LoraSettings, add_lora, has_lora, lora_merged, lora_settings_of, mark_only_lora_trainable
from care.models.matryoshka import matryoshka_truncation
from care.models.query import local_path_or_name, model_kwargs_for

logger = logging.getLogger(__name__)

#: Paper's document length budget.
DEFAULT_DOCUMENT_MAX_SEQ_LENGTH = 512
DEFAULT_PADDING_SIDE = "left"
PADDING_SIDES = ("left", "right")
#: Probe text for checking that the tokenizer appends EOS.
_EOS_PROBE = "体检"


def appends_eos(tokenizer) -> bool:
    """True when encoding a text with special tokens ends in the tokenizer's EOS id."""
    if tokenizer.eos_token_id is None:
        return False
    ids = tokenizer(_EOS_PROBE, add_special_tokens=True)["input_ids"]
    return bool(ids) and ids[-1] == tokenizer.eos_token_id


def ensure_eos_appended(tokenizer, eos_token: str | None = None) -> None:
    """Make ``tokenizer`` append ``eos_token`` (default: its own EOS) to every sequence.

    Uses the tokenizer's own switch (``add_eos_token``, transformers v5), which rewrites the fast
    tokenizer's post-processor and is saved with ``save_pretrained``, so a reloaded folder keeps it.
    Qwen3-Embedding appends ``<|endoftext|>``; base Qwen3 tokenizers name ``<|im_end|>`` or
    ``<|endoftext|>`` as EOS and append nothing, hence this step.

    Raises:
        CareError: the tokenizer has no EOS token and none was given, or it cannot append one.
    """
    if eos_token is not None and eos_token != tokenizer.eos_token:
        if tokenizer.convert_tokens_to_ids(eos_token) in (None, tokenizer.unk_token_id):
            raise CareError(f"eos_token {eos_token!r} is not in the document tokenizer's vocabulary")
        tokenizer.eos_token = eos_token
    if tokenizer.eos_token is None:
        raise CareError(
            "the document tokenizer has no EOS token; pass eos_token= (Qwen3 uses '<|endoftext|>') so that "
            "last-token pooling reads an end-of-sequence state"
        )
    if appends_eos(tokenizer):
        return
    if not hasattr(type(tokenizer), "add_eos_token"):
        raise CareError(f"cannot make {type(tokenizer).__name__} append EOS; use a fast (tokenizers) tokenizer")
    tokenizer.add_eos_token = True
    if not appends_eos(tokenizer):
        raise CareError(f"{type(tokenizer).__name__} still does not append {tokenizer.eos_token!r} after add_eos_token")
    logger.info("document tokenizer now appends %s", tokenizer.eos_token)


def build_document_encoder(
    model_name_or_path: str | Path,
    *,
    lora: LoraSettings | None = None,
    output_dim: int | None = None,
    max_seq_length: int = DEFAULT_DOCUMENT_MAX_SEQ_LENGTH,
    dtype: torch.dtype | str | None = None,
    padding_side: str = DEFAULT_PADDING_SIDE,
    eos_token: str | None = None,
    trust_remote_code: bool = False,
) -> SentenceTransformer:
    """Build the document encoder ``Transformer -> Pooling(lasttoken) -> [cut] -> Normalize``.

    Args:
        model_name_or_path: a decoder-only checkpoint (``Qwen/Qwen3-4B``, ``Qwen/Qwen3-Embedding-4B``,
            any ``AutoModel``), a tiny Qwen3 from :func:`care.models.presets.make_tiny_models`, or a
            folder holding a peft adapter saved by this function (resumes that adapter).
        lora: add a fresh LoRA adapter with these settings (only adapter weights train). None: no
            new adapter; an adapter already in the folder is loaded and stays trainable.
        output_dim: keep the first ``output_dim`` coordinates (Matryoshka cut); None keeps all.
        max_seq_length: truncation length in tokens (EOS included).
        dtype: weights dtype; None keeps the checkpoint's.
        padding_side: ``"left"`` (default) or ``"right"``; pooling is correct under both.
        eos_token: token to append (default: the tokenizer's EOS).
        trust_remote_code: for checkpoints with custom modelling code.
    Returns:
        A ``SentenceTransformer`` giving L2-normalised ``output_dim`` (or hidden-size) vectors.
    Raises:
        CareError: bad padding side, an output_dim larger than the model width, LoRA settings that
            conflict with an adapter already in the folder, or no way to append EOS.
    """
    if padding_side not in PADDING_SIDES:
        raise CareError(f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}")
    processor_kwargs = {"padding_side": padding_side}
    if trust_remote_code:
        processor_kwargs["trust_remote_code"] = True
    transformer = Transformer(
        local_path_or_name(model_name_or_path),
        max_seq_length=max_seq_length,
        model_kwargs=model_kwargs_for(dtype, trust_remote_code),
        processor_kwargs=processor_kwargs,
        config_kwargs={"trust_remote_code": True} if trust_remote_code else None,
    )
    transformer.tokenizer.padding_side = padding_side
    ensure_eos_appended(transformer.tokenizer, eos_token)

    hf_model = transformer.auto_model
    existing = lora_settings_of(hf_model) if has_lora(hf_model) else None
    if existing is not None:
        if lora is not None and _normalised(lora) != _normalised(existing):
            raise CareError(
                f"{model_name_or_path} already holds a LoRA adapter {existing.to_dict()}, which differs from the "
                f"requested {lora.to_dict()}; pass matching settings (or none) to resume it, or build from the base model"
            )
        n = mark_only_lora_trainable(hf_model)
        logger.info("resumed LoRA adapter from %s (%d trainable parameters)", model_name_or_path, n)
    elif lora is not None:
        add_lora(hf_model, lora)
        logger.info("added LoRA %s", lora.to_dict())

    native_dim = transformer.get_embedding_dimension()
    modules = [transformer, Pooling(native_dim, pooling_mode="lasttoken")]
    if output_dim is not None and output_dim != native_dim:
        modules.append(matryoshka_truncation(native_dim, output_dim, dtype=transformer.auto_model.dtype))
    modules.append(Normalize())
    model = SentenceTransformer(modules=modules)
    logger.info("document encoder %s: native %d-d -> %d-d, last-token pooling", model_name_or_path, native_dim,
                output_dim or native_dim)
    return model


def save_document_encoder(model: SentenceTransformer, path: str | Path, *, merge_lora: bool = False) -> Path:
    """Save a standalone document tower atomically.

    Without ``merge_lora`` a LoRA tower is written as a peft adapter (``adapter_config.json`` naming the
    base model + ``adapter_model.safetensors``): ``SentenceTransformer(path)`` loads base + adapter and
    ``build_document_encoder(path)`` resumes training it. With ``merge_lora`` the adapter is folded in
    and a plain checkpoint is written (the in-memory model keeps its adapter).
    """
    transformer = model[0]
    with atomic_dir(path) as tmp:
        if merge_lora and isinstance(transformer, Transformer) and has_lora(transformer.auto_model):
            with lora_merged(transformer.auto_model):
                model.save(str(tmp))
        else:
            model.save(str(tmp))
    return Path(path)


def _normalised(settings: LoraSettings) -> LoraSettings:
    return LoraSettings(settings.r, settings.alpha, settings.dropout, tuple(sorted(settings.target_modules)))
