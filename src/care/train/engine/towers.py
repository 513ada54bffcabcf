"""Load the query / document towers a stage needs, wrap the trainable ones, and save the results.

A tower is a :class:`~sentence_transformers.SentenceTransformer` built by :mod:`care.models`
(``build_query_encoder`` / ``build_document_encoder``) from a Hugging Face checkpoint, or loaded
as-is from a SentenceTransformer folder written by an earlier stage (``modules.json`` present).
:class:`Towers` holds only the *trainable* towers, so a frozen tower can never reach the optimizer,
and routes ``forward(tower, features)`` so DistributedDataParallel sees every forward pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from care.config import ConfigError
from care.errors import CareError
from care.models.e5_export import EXPORT_RECORD as E5_EXPORT_RECORD
from care.train.engine.config import ModelConfig, RuntimeConfig

logger = logging.getLogger(__name__)

ST_MARKER = "modules.json"


def is_sentence_transformer_folder(path: str | Path) -> bool:
    return (Path(path) / ST_MARKER).is_file()


class Towers(nn.Module):
    """The trainable towers of a stage, by name (``"query"``, ``"document"``).

    ``forward(tower, features)`` runs one tower on tokenised features and returns its
    ``sentence_embedding`` ``[n, d]``.
    """

    def __init__(self, towers: dict[str, nn.Module]) -> None:
        super().__init__()
        self.towers = nn.ModuleDict(towers)

    def forward(self, tower: str, features: dict[str, Any]) -> torch.Tensor:
        return self.towers[tower](features)["sentence_embedding"]


def load_query_tower(cfg: ModelConfig, path: str | None = None, *,
                     weight_texts: Callable[[], Iterable[str]] | None = None):
    """The query encoder (CLS pooling by default) from ``path`` or ``cfg.query_model``; a static tower folder as the
    trainable weighted lookup (:func:`care.train.engine.static_query.load_static_tower`, its IDF weights counted over
    ``weight_texts()`` when ``cfg.query_token_weights`` says so)."""
    from sentence_transformers import SentenceTransformer

    from care.models.query import build_query_encoder
    from care.train.engine.static_query import is_static_folder, load_static_tower

    path = path or cfg.query_model
    if path is None:
        raise CareError("no query model: set model.query_model")
    if is_static_folder(path):
        return load_static_tower(cfg, path, weight_texts)
    if cfg.query_token_weights is not None or cfg.learn_query_token_weights:
        raise CareError(f"model.query_token_weights / learn_query_token_weights weigh a static query tower's tokens; "
                        f"{path} is not one (e5?layers=0 is): unset them")
    if is_sentence_transformer_folder(path):
        model = SentenceTransformer(str(path), device="cpu", trust_remote_code=cfg.trust_remote_code)
        model.max_seq_length = cfg.query_max_seq_length
    else:
        model = build_query_encoder(path, pooling=cfg.query_pooling, max_seq_length=cfg.query_max_seq_length,
                                    trust_remote_code=cfg.trust_remote_code)
    # the query tower is always fully trained: fp32 master weights even when the checkpoint is stored in
    # 16 bits (transformers loads the stored dtype); mixed precision then autocasts the compute
    model.float()
    if cfg.freeze_query_embeddings:
        # a multilingual vocabulary (e5: 250k x 384) dominates the parameter count but barely moves in
        # fine-tuning; freezing it removes its gradient and AdamW state
        model[0].auto_model.get_input_embeddings().requires_grad_(False)
    return model


def query_width(cfg: ModelConfig) -> int | None:
    """Embedding width of the configured query encoder without building it (``None`` if unknown)."""
    if not cfg.query_model:
        return None
    path = Path(cfg.query_model)
    if is_sentence_transformer_folder(path):
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(path), device="cpu", trust_remote_code=cfg.trust_remote_code)
        return int(model.get_embedding_dimension())
    from transformers import AutoConfig

    return int(AutoConfig.from_pretrained(str(cfg.query_model), trust_remote_code=cfg.trust_remote_code).hidden_size)


def document_output_dim(cfg: ModelConfig) -> int | None:
    """Width the document tower must output: ``output_dim``, else the query width (when
    ``truncate_to_query_width``), else ``None`` (native width)."""
    if cfg.output_dim is not None:
        return cfg.output_dim
    return query_width(cfg) if cfg.truncate_to_query_width else None


def cut_document_tower(model, output_dim: int):
    """Return ``model`` with a Matryoshka cut to ``output_dim`` inserted before its final Normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    from care.models.matryoshka import matryoshka_truncation

    native = int(model.get_embedding_dimension())
    if native == output_dim:
        return model
    modules = list(model.children())
    if modules and isinstance(modules[-1], Normalize):
        modules = modules[:-1]
    dtype = next(model.parameters()).dtype
    modules += [matryoshka_truncation(native, output_dim, dtype=dtype), Normalize()]
    logger.info("document tower cut from %d to %d dims", native, output_dim)
    return SentenceTransformer(modules=modules, device="cpu")


def training_device(runtime: RuntimeConfig) -> str:
    """The device a stage trains on, for work done outside its loop (mining, encoding): ``cpu`` when
    ``runtime.cpu`` forces it, else this process's GPU (``cuda:$LOCAL_RANK`` under a launcher), else
    :func:`care.encoders.hf.resolve_device`'s choice (``mps`` or ``cpu``)."""
    from care.encoders.hf import launcher_device, resolve_device

    return "cpu" if runtime.cpu else resolve_device(launcher_device())


def load_document_tower(cfg: ModelConfig, *, trainable: bool, path: str | None = None):
    """The document encoder from ``path`` or ``cfg.document_model``.

    From a plain checkpoint: ``cfg.document_pooling`` (last-token by default, for LLM towers; an e5 export with
    last-token pooling is refused: e5 is mean-pooled), a Matryoshka cut to :func:`document_output_dim`
    and, when ``trainable`` and ``cfg.lora`` is set, a fresh LoRA adapter. From a
    SentenceTransformer folder of an earlier stage: loaded as saved (its LoRA adapter, if any, is
    resumed and stays the only trainable part) and cut when it is wider than required. The cut is
    never trained. A frozen tower has ``requires_grad=False`` everywhere and is in eval mode.
    """
    from sentence_transformers import SentenceTransformer

    from care.models.document import build_document_encoder
    from care.models.lora import add_lora, has_lora, mark_only_lora_trainable
    from care.models.matryoshka import freeze_truncation, is_matryoshka_truncation

    path = path or cfg.document_model
    if path is None:
        raise CareError("no document model: set model.document_model")
    output_dim = document_output_dim(cfg)
    if is_sentence_transformer_folder(path):
        model = SentenceTransformer(str(path), device="cpu", trust_remote_code=cfg.trust_remote_code)
        model.max_seq_length = cfg.document_max_seq_length
        hf_model = model[0].auto_model
        if trainable:
            if has_lora(hf_model):
                mark_only_lora_trainable(hf_model)
            elif cfg.lora is not None:
                add_lora(hf_model, cfg.lora)
        if output_dim is not None:
            model = cut_document_tower(model, output_dim)
    elif cfg.document_pooling == "lasttoken" and (Path(path) / E5_EXPORT_RECORD).is_file():
        raise ConfigError(f"{path}: an e5 export is mean-pooled, but model.document_pooling is 'lasttoken' (the "
                          "default, for LLM document towers); set model.document_pooling: mean in the stage config "
                          "(the shipped e5 preset does)")
    elif cfg.document_pooling != "lasttoken":  # a BERT-style document tower (e5: mean pooling)
        from care.models.query import build_query_encoder

        model = build_query_encoder(path, pooling=cfg.document_pooling, max_seq_length=cfg.document_max_seq_length,
                                    trust_remote_code=cfg.trust_remote_code)
        if trainable and cfg.lora is not None:
            add_lora(model[0].auto_model, cfg.lora)
        if output_dim is not None:
            model = cut_document_tower(model, output_dim)
    else:
        model = build_document_encoder(path, lora=cfg.lora if trainable else None,
                                       output_dim=output_dim, max_seq_length=cfg.document_max_seq_length,
                                       trust_remote_code=cfg.trust_remote_code)
    for module in model.children():
        if is_matryoshka_truncation(module):
            freeze_truncation(module)
    if not trainable:
        model.requires_grad_(False)
        model.eval()
    elif cfg.lora is None:
        model.float()  # fully fine-tuned: fp32 master weights (a LoRA base stays in its stored dtype, frozen)
    return model


def enable_gradient_checkpointing(model) -> None:
    """Turn on activation checkpointing in a tower's transformer (non-reentrant, works with LoRA)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def save_tower(model, path: str | Path, *, merge_lora: bool = False) -> Path:
    """Save one tower as a SentenceTransformer folder (LoRA adapters merged into the weights if asked; a static tower
    as the plain ``StaticEmbedding`` of its folded rows, :func:`care.train.engine.static_query.exportable`)."""
    import contextlib

    from care.models.lora import has_lora, lora_merged
    from care.train.engine.static_query import exportable, is_static_model

    path = Path(path)
    if is_static_model(model):
        exportable(model).save(str(path))
        return path
    hf_model = model[0].auto_model
    ctx = lora_merged(hf_model) if (merge_lora and has_lora(hf_model)) else contextlib.nullcontext()
    with ctx:
        model.save(str(path))
    return path
