"""The prefixes a model was trained with, stored in its folder so every loader queries it as trained.

A model fine-tuned with fixed text prefixes (e5's ``query: `` / ``passage: ``) must be encoded with those
prefixes and without task instructions: queried with the paper's ``Instruct: ...\\nQuery: `` format instead,
its vectors drift away from what it learned. Stages that set ``model.save_prompts`` (the ``e5`` preset)
write ``care_prompts.json`` into every folder they save (towers and the CARE model)::

    {"query_prefix": "query: ", "document_prefix": "passage: ", "instructions": false}

:func:`stored_prompt_options` returns those fields as model-spec options; the spec loaders
(:func:`care.encoders.registry.load_model`, :func:`care.encoders.sides.load_side`) apply them under the
spec's own options, so ``FOLDER?instructions=true`` still overrides them. ``care bench``, ``care index
build``, ``care serve``, ``care export-onnx`` and ``care run`` therefore all encode such a folder the way it
was trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from care.errors import CareError

PROMPTS_FILE = "care_prompts.json"
#: The fields the file may hold (HFEncoderConfig options).
PROMPT_FIELDS: tuple[str, ...] = ("query_prefix", "document_prefix", "instructions")


def write_stored_prompts(folder: str | Path, query_prefix: str | None, document_prefix: str | None) -> Path:
    """Record ``folder``'s training prefixes (task instructions off); returns the file written."""
    from care.data.io import write_json

    path = Path(folder) / PROMPTS_FILE
    write_json(path, {"query_prefix": query_prefix, "document_prefix": document_prefix, "instructions": False})
    return path


def stored_prompt_options(folder: str | Path) -> dict[str, Any]:
    """The spec options stored in ``folder/care_prompts.json`` (``{}`` when there is none or ``folder`` is
    not a local folder).

    Raises:
        CareError: the file is not a JSON object of :data:`PROMPT_FIELDS`, naming the file.
    """
    path = Path(folder) / PROMPTS_FILE
    try:
        if not path.is_file():
            return {}
    except OSError:  # a hub id or a name too long for a path
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CareError(f"{path}: unreadable ({exc}); delete it or write it again with care_prompts' fields "
                        f"{', '.join(PROMPT_FIELDS)}") from None
    if not isinstance(data, dict) or set(data) - set(PROMPT_FIELDS):
        raise CareError(f"{path}: expected a JSON object with the fields {', '.join(PROMPT_FIELDS)}")
    return {key: value for key, value in data.items() if value is not None}
