"""Stage configs shipped with the package, chosen by name or by the document tower they were tuned for.

A preset is a folder of ``<stage>.yaml`` files like ``--config-dir`` takes (model paths, data files
and output folders in them are replaced by the recipe's wiring). ``e5`` is the recipe measured on
real weights (multilingual-e5-small: a 6-layer strided cut as the query tower, e5's 12 layers as the
document tower, e5's ``query: `` / ``passage: `` prefixes; ``benchmarks/bench_real_weights.py``,
``docs/training.md``); the recipe picks it by default when the document model is an e5 checkpoint
(:func:`default_preset`). Without a preset the stages use their declared defaults, which follow the
paper (a decoder LLM document tower with LoRA).

A config folder may also ship ``recipe.yaml``: recipe settings a run uses when it sets none itself
(:func:`folder_recipe_defaults`; today ``mine_negatives``, the e5 preset's Stage II hard negatives).
"""

from __future__ import annotations

import json
import logging
from importlib import resources
from pathlib import Path
from typing import Any

from care.errors import CareError
from care.models.e5_export import EXPORT_RECORD as E5_EXPORT_RECORD

logger = logging.getLogger(__name__)

#: ``--config-dir preset:NAME`` names a shipped preset.
PRESET_PREFIX = "preset:"
#: Shipped presets (folders beside this file).
PRESETS: tuple[str, ...] = ("e5",)
#: A config folder's recipe defaults (:func:`folder_recipe_defaults`).
RECIPE_DEFAULTS_FILE = "recipe.yaml"
#: The recipe fields a config folder may set a default for.
FOLDER_RECIPE_FIELDS: tuple[str, ...] = ("mine_negatives",)
#: A Hugging Face ``config.json``'s ``_name_or_path`` containing this names an e5 checkpoint.
E5_NAME_MARK = "e5"


def preset_dir(name: str) -> Path:
    """The folder of the shipped preset ``name``.

    Raises:
        CareError: an unknown name (the known ones listed).
    """
    if name not in PRESETS:
        raise CareError(f"unknown preset {name!r}; shipped presets: {', '.join(PRESETS)}")
    return Path(str(resources.files(__package__) / name))


def is_e5_checkpoint(model: str | Path) -> bool:
    """True for a local folder exported by ``care model export-e5`` or a Hugging Face e5 checkpoint
    (``_name_or_path`` naming e5, e.g. ``intfloat/multilingual-e5-small``)."""
    folder = Path(str(model).split("?", 1)[0])
    if (folder / E5_EXPORT_RECORD).is_file():
        return True
    config = folder / "config.json"
    if not config.is_file():
        return False
    try:
        name = str(json.loads(config.read_text(encoding="utf-8")).get("_name_or_path", ""))
    except (OSError, ValueError):
        return False
    return E5_NAME_MARK in Path(name).name.lower().split("-")


def default_preset(document_model: str | None) -> str | None:
    """The preset the recipe uses when no config folder is given: ``e5`` for an e5 document tower."""
    return "e5" if document_model and is_e5_checkpoint(document_model) else None


def resolve_config_dir(config_dir: str | Path | None, document_model: str | None) -> Path | None:
    """``preset:NAME`` -> that preset's folder; ``None`` -> :func:`default_preset` (logged) or None;
    anything else -> the folder as given."""
    if config_dir is None:
        name = default_preset(document_model)
        if name is None:
            return None
        logger.info("recipe: the document model %s is an e5 checkpoint: stage configs from the shipped '%s' preset "
                    "(pass --config-dir to use your own)", document_model, name)
        return preset_dir(name)
    text = str(config_dir)
    if text.startswith(PRESET_PREFIX):
        return preset_dir(text[len(PRESET_PREFIX):])
    return Path(config_dir)


def folder_recipe_defaults(config_dir: str | Path | None) -> dict[str, Any]:
    """The recipe defaults ``config_dir/recipe.yaml`` ships (``{}`` without a folder or file): fields of
    :data:`FOLDER_RECIPE_FIELDS` a run uses when it leaves them unset (``mine_negatives``: a
    :class:`care.train.recipes.model_negatives.MiningConfig` as a dict).

    Raises:
        CareError: a file that is not a mapping, names another field, or holds invalid mining settings —
            naming the file.
    """
    if config_dir is None:
        return {}
    path = Path(config_dir) / RECIPE_DEFAULTS_FILE
    if not path.is_file():
        return {}
    from care.config import build, read_config_file
    from care.train.recipes.model_negatives import MiningConfig

    data = read_config_file(path, "recipe defaults")
    unknown = sorted(set(data) - set(FOLDER_RECIPE_FIELDS))
    if unknown:
        raise CareError(f"{path}: a config folder's recipe.yaml may set {', '.join(FOLDER_RECIPE_FIELDS)} only, "
                        f"not {', '.join(unknown)}; put ablation switches in an --ablation file")
    if data.get("mine_negatives") is not None:
        build(MiningConfig, data["mine_negatives"], source=f"{path}: mine_negatives")
    return data
