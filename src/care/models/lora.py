"""LoRA for the document tower through peft (paper: r=32, alpha=64 on all attention and MLP projections).

Adapters are injected with transformers' peft integration (``PreTrainedModel.add_adapter``, the same
path as sentence-transformers' ``model.add_adapter``), so the Hugging Face model keeps its class and
``save_pretrained`` writes a standard peft adapter folder (``adapter_config.json`` +
``adapter_model.safetensors``) whose ``base_model_name_or_path`` names the base checkpoint.
``SentenceTransformer(folder)`` / ``AutoModel.from_pretrained(folder)`` load base + adapter from it.

:func:`lora_merged` temporarily folds the adapters into the base weights, so a plain merged model can
be written (no peft needed to load it, no base checkpoint reference), then restores the adapters.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from torch import nn

from care.errors import CareError
from care.models.lora_settings import DEFAULT_TARGET_MODULES, LoraSettings

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_TARGET_MODULES", "LoraSettings", "add_lora", "has_lora", "lora_merged", "lora_settings_of",
           "mark_only_lora_trainable"]

#: Substring peft uses in adapter parameter names.
LORA_PARAM_MARKER = "lora_"
ADAPTER_NAME = "default"
#: Key prefix of a peft-format state dict.
PEFT_PREFIX = "base_model.model."


def has_lora(model: nn.Module) -> bool:
    """True when peft adapter layers are injected anywhere in ``model``."""
    return any(LORA_PARAM_MARKER in name for name, _ in model.named_parameters())


def lora_settings_of(hf_model: nn.Module) -> LoraSettings | None:
    """The :class:`LoraSettings` of the active adapter of a transformers model, or None."""
    configs = getattr(hf_model, "peft_config", None)
    if not configs:
        return None
    config = configs.get(ADAPTER_NAME) or next(iter(configs.values()))
    return LoraSettings(
        r=config.r, alpha=config.lora_alpha, dropout=config.lora_dropout,
        target_modules=tuple(sorted(config.target_modules)) if not isinstance(config.target_modules, str)
        else (config.target_modules,),
    )


def add_lora(hf_model: nn.Module, settings: LoraSettings) -> None:
    """Inject a fresh LoRA adapter into a transformers model and make ONLY its parameters trainable.

    Raises:
        CareError: none of ``settings.target_modules`` exists in the model.
    """
    names = {name.rsplit(".", 1)[-1] for name, _ in hf_model.named_modules()}
    missing = [t for t in settings.target_modules if t not in names]
    if len(missing) == len(settings.target_modules):
        raise CareError(
            f"none of the LoRA target modules {list(settings.target_modules)} exists in "
            f"{type(hf_model).__name__}; pick linear layer names from the model (e.g. q_proj, v_proj)"
        )
    if missing:
        logger.warning("LoRA target modules not found in %s (skipped): %s", type(hf_model).__name__, missing)
    try:
        hf_model.add_adapter(settings.to_peft_config(), adapter_name=ADAPTER_NAME)
    except ValueError as exc:
        if "version of PEFT" not in str(exc):
            raise
        raise CareError(f"{exc} (transformers and peft disagree; `care doctor` shows both versions; "
                        "bash scripts/setup.sh installs the pinned pair from constraints.txt)") from exc
    mark_only_lora_trainable(hf_model)


def mark_only_lora_trainable(model: nn.Module) -> int:
    """Freeze every parameter except LoRA ones; returns the number of trainable parameters."""
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad = LORA_PARAM_MARKER in name
        trainable += param.numel() if param.requires_grad else 0
    return trainable


def _is_adapter_conversion(conversion: Any) -> bool:
    patterns = getattr(conversion, "source_patterns", None) or []
    return any(PEFT_PREFIX in p or LORA_PARAM_MARKER in p for p in patterns)


@contextlib.contextmanager
def lora_merged(hf_model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, ``hf_model`` is a plain model with LoRA folded into its weights.

    ``W <- W + (alpha / r) * B A`` for every adapted layer; the adapter layers are swapped for their
    base layers and the peft bookkeeping hidden, so ``save_pretrained`` writes a full merged
    checkpoint. On exit the adapter layers are put back and unmerged (restored up to float rounding).
    """
    from peft.tuners.tuners_utils import BaseTunerLayer

    tuner_layers = [
        (name, module) for name, module in hf_model.named_modules() if isinstance(module, BaseTunerLayer)
    ]
    if not tuner_layers:
        yield hf_model
        return
    swapped: list[tuple[nn.Module, str, nn.Module]] = []
    peft_flag = getattr(hf_model, "_hf_peft_config_loaded", False)
    peft_config = hf_model.__dict__.pop("peft_config", None)
    # transformers records the renamings it applied when loading an adapter (``base_model.model.`` ->
    # ``""``) and would revert them on save; they belong to the adapter, not to the merged model.
    conversions = hf_model.__dict__.get("_weight_conversions")
    if conversions:
        hf_model._weight_conversions = [c for c in conversions if not _is_adapter_conversion(c)]
    try:
        for name, layer in tuner_layers:
            layer.merge()
            parent_name, _, child = name.rpartition(".")
            parent = hf_model.get_submodule(parent_name) if parent_name else hf_model
            setattr(parent, child, layer.get_base_layer())
            swapped.append((parent, child, layer))
        hf_model._hf_peft_config_loaded = False
        yield hf_model
    finally:
        for parent, child, layer in swapped:
            setattr(parent, child, layer)
            layer.unmerge()
        hf_model._hf_peft_config_loaded = peft_flag
        if conversions:
            hf_model._weight_conversions = conversions
        if peft_config is not None:
            hf_model.peft_config = peft_config
