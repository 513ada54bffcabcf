"""CARE models: BERT-style query tower, LLM document tower (LoRA, Matryoshka cut), routed CARE model,
tiny models and a Chinese character tokenizer.

Names are imported lazily so that ``care --help`` (which imports :mod:`care.models.cli`) stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "build_query_encoder": "care.models.query",
    "build_document_encoder": "care.models.document",
    "save_document_encoder": "care.models.document",
    "ensure_eos_appended": "care.models.document",
    "LoraSettings": "care.models.lora_settings",
    "build_care_model": "care.models.asymmetric",
    "save_care_model": "care.models.asymmetric",
    "load_care_model": "care.models.asymmetric",
    "split_care_model": "care.models.asymmetric",
    "read_care_config": "care.models.asymmetric",
    "CareConfig": "care.models.asymmetric",
    "train_char_tokenizer": "care.models.tokenizer",
    "make_tiny_models": "care.models.presets",
    "build_random_model": "care.models.presets",
    "count_parameters": "care.models.presets",
    "get_preset": "care.models.presets",
    "PRESETS": "care.models.presets",
    "instruction_for_task": "care.models.instructions",
    "query_prompt_name": "care.models.instructions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'care.models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
