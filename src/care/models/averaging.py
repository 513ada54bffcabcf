"""Weight averaging of saved models ("model soups", Wortsman et al., ICML 2022).

Models fine-tuned from one start (e.g. several Stage II runs of one recipe with different settings) often
average into a model at least as good as the best of them, at no inference cost:

    θ_soup = Σ_i w_i · θ_i / Σ_i w_i

:func:`average_model_folders` applies that to every floating-point tensor of the ``*.safetensors`` files of
saved model folders with the same layout (a CARE folder with both towers, or one tower). Everything else
(configs, tokenizers, integer buffers) is taken from the first folder; integer tensors must be equal in all.
LoRA adapters are refused: averaging the A and B factors separately is not averaging the updates they make
(save with ``model.merge_lora_on_save: true``, or merge first).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from care.errors import CareError

logger = logging.getLogger(__name__)

#: File written into the averaged folder: the sources and their normalised weights.
PROVENANCE_FILE = "averaged_from.json"
#: Weight files of a PEFT adapter (refused: see the module docstring).
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")


def _weight_files(folder: Path) -> list[Path]:
    """The folder's ``*.safetensors`` files, relative to it (sorted); refuses adapters and ``.bin``-only models."""
    if not folder.is_dir():
        raise CareError(f"{folder}: not a model folder")
    adapters = [p for name in ADAPTER_FILES for p in folder.rglob(name)]
    if adapters:
        raise CareError(f"{adapters[0]}: a LoRA adapter cannot be averaged factor by factor; save the model with "
                        "model.merge_lora_on_save: true (or merge the adapter) and average the merged weights")
    files = sorted(p.relative_to(folder) for p in folder.rglob("*.safetensors"))
    if not files:
        raise CareError(f"{folder}: no *.safetensors weights to average (re-save the model with safetensors)")
    return files


def normalised_weights(n: int, weights: Sequence[float] | None) -> list[float]:
    """``weights`` scaled to sum to 1 (``None``: uniform over ``n`` models).

    Raises:
        CareError: a count other than ``n``, a negative weight, or weights summing to 0.
    """
    if weights is None:
        return [1.0 / n] * n
    if len(weights) != n:
        raise CareError(f"--weight: {len(weights)} weight(s) given for {n} model(s); give one per model or none")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise CareError(f"--weight: weights must be >= 0 with a positive sum, got {list(weights)}")
    total = float(sum(weights))
    return [float(w) / total for w in weights]


def average_model_folders(folders: Sequence[str | Path], output: str | Path,
                          weights: Sequence[float] | None = None) -> Path:
    """Write the weighted average of saved model folders to ``output`` (atomically).

    Args:
        folders: two or more folders with the same files and tensors (names, shapes, dtypes).
        output: the folder to write: a copy of the first folder with averaged ``*.safetensors`` and a
            :data:`PROVENANCE_FILE`.
        weights: one non-negative weight per folder (normalised to sum 1); ``None``: uniform.

    Returns:
        ``output``.

    Raises:
        CareError: fewer than two folders, a folder that differs in files, tensor names, shapes or integer
            buffers (the file and tensor are named), a LoRA adapter, or bad weights.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from care.models.folders import atomic_dir

    sources = [Path(f) for f in folders]
    if len(sources) < 2:
        raise CareError("averaging needs two or more model folders")
    shares = normalised_weights(len(sources), weights)
    files = _weight_files(sources[0])
    for other in sources[1:]:
        if _weight_files(other) != files:
            raise CareError(f"{other}: its weight files {[str(f) for f in _weight_files(other)]} differ from "
                            f"{sources[0]}'s {[str(f) for f in files]}; only models of one layout can be averaged")
    output = Path(output)
    with atomic_dir(output) as tmp:
        shutil.copytree(sources[0], tmp, dirs_exist_ok=True)
        for rel in files:
            first = load_file(str(sources[0] / rel))
            sums = {k: v.double() * shares[0] for k, v in first.items() if v.is_floating_point()}
            for source, share in zip(sources[1:], shares[1:]):
                tensors = load_file(str(source / rel))
                if set(tensors) != set(first):
                    missing = sorted(set(first) ^ set(tensors))[0]
                    raise CareError(f"{source / rel}: tensor '{missing}' is in one model and not the other; "
                                    "only models of one layout can be averaged")
                for key, value in tensors.items():
                    if value.shape != first[key].shape or value.dtype != first[key].dtype:
                        raise CareError(f"{source / rel}: tensor '{key}' is {value.dtype} {tuple(value.shape)}, "
                                        f"{first[key].dtype} {tuple(first[key].shape)} in {sources[0] / rel}")
                    if key in sums:
                        sums[key] += value.double() * share
                    elif not torch.equal(value, first[key]):
                        raise CareError(f"{source / rel}: integer tensor '{key}' differs from {sources[0] / rel}'s; "
                                        "integer buffers cannot be averaged")
            averaged = {k: (sums[k].to(v.dtype) if k in sums else v).contiguous() for k, v in first.items()}
            save_file(averaged, str(tmp / rel), metadata={"format": "pt"})
        (tmp / PROVENANCE_FILE).write_text(json.dumps(
            {"sources": [str(s) for s in sources], "weights": shares, "fingerprints": _fingerprints(sources)},
            ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    logger.info("averaged %d models (weights %s) into %s", len(sources), [round(w, 4) for w in shares], output)
    return output


def _fingerprints(folders: Sequence[Path]) -> list[str]:
    """Each source folder's fingerprint (file names, sizes, mtimes): a source retrained in place gets a new one."""
    from care.encoders.fingerprint import folder_fingerprint

    return [folder_fingerprint(f) for f in folders]


def average_once(folders: Sequence[str | Path], output: str | Path, weights: Sequence[float] | None = None) -> Path:
    """:func:`average_model_folders`, unless ``output`` already holds the average of these very sources: its
    :data:`PROVENANCE_FILE` names the same folders, weights and fingerprints (a source retrained since, or another
    weight, averages again). Returns ``output``."""
    sources = [Path(f) for f in folders]
    recorded = Path(output) / PROVENANCE_FILE
    if recorded.is_file() and all(s.is_dir() for s in sources):
        before = json.loads(recorded.read_text(encoding="utf-8"))
        now = {"sources": [str(s) for s in sources], "weights": normalised_weights(len(sources), weights),
               "fingerprints": _fingerprints(sources)}
        if all(before.get(k) == v for k, v in now.items()):
            logger.info("%s already averages %s; kept", output, [str(s) for s in sources])
            return Path(output)
    return average_model_folders(sources, output, weights)
