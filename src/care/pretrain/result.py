"""What a finished pretraining run produced: ``pretrain_result.json`` (written last) and the files beside it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

RESULT_FILE = "pretrain_result.json"
CONFIG_FILE = "pretrain_config.yaml"
MODEL_DIRNAME = "model"


@dataclass
class PretrainResult:
    """What a finished run produced (also ``pretrain_result.json``).

    model: ``<output_dir>/model``, the pretrained encoder as a plain ``AutoModel`` folder with its tokenizer;
    records_seen: records read over the run (every rank's); epochs_started: passes over the files begun;
    extra: the objective's figures (RetroMAE's decoding and mask ratios, the contrastive temperature).
    """

    method: str
    output_dir: str
    model: str
    global_step: int
    final_loss: float | None
    records_seen: int
    epochs_started: int
    extra: dict = field(default_factory=dict)


def read_pretrain_result(output_dir: str | Path) -> PretrainResult | None:
    """The result of a finished run in ``output_dir``, or ``None``."""
    path = Path(output_dir) / RESULT_FILE
    if not path.is_file():
        return None
    return PretrainResult(**json.loads(path.read_text(encoding="utf-8")))
