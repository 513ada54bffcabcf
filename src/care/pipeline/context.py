"""What every step of a run shares: the config, the run folder's layout, the manifest, the encoders.

Layout of the run folder::

    manifest.json                 steps, status, timings, versions, config
    run.log                       everything the libraries log (the console shows step progress only)
    curate/                       anonymised + diversified raw questions and documents, reports
    label/                        judged candidates, labelled rows, the training file (train.jsonl)
    models/care/                  CARE's recipe (base/, init_query, init_document, stage1, stage2, ablations/)
    models/student/               the student (base/, stage1/, finetune/, model/, symmetric_model/)
    models/baselines/<name>/      the paper's baselines
    eval/                         one TaskResult JSON per (model, task), latency.json, onnx/
    cache/                        the encoders' memos, the embedding cache, the teacher's vectors (or ``cache_dir``)
    index/                        ``care index build`` output of the best trained model
    results.md / results.json / quality_vs_qps.png     the report
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.encoders.base import Encoder
from care.encoders.memo import MemoEncoder
from care.errors import CareError
from care.pipeline.config import E5_JUDGE_THRESHOLDS, HASHING, HASHING_JUDGE_THRESHOLDS, RunConfig
from care.pipeline.manifest import RunManifest

logger = logging.getLogger(__name__)

MEMO_FILE = "encoder_memo.npz"
#: The cache folder of the embedding cache shared by the steps (teacher vectors, evaluation, index).
EMBEDDINGS_CACHE = "embeddings"


@dataclass
class RunContext:
    """The config, the run folder, the manifest and lazily loaded shared encoders.

    The curation encoder (e5 by default) sits behind a :class:`MemoEncoder` saved in the run folder, so a
    text shared by curation, judging, the student's teacher and evaluation is encoded once.
    """

    config: RunConfig
    root: Path
    manifest: RunManifest | None = None
    #: stage settings a step's wrapper adds to CARE's recipe (the query budget's richer Stage I), typed
    #: (:class:`care.train.stage_settings.StageSetting`); before ``recipes.care.overrides``
    recipe_settings: tuple[Any, ...] = ()
    _encoders: dict[str, Any] = field(default_factory=dict, repr=False)

    def dir(self, *parts: str) -> Path:
        """``root/parts...``, created."""
        path = self.root.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def shared_encoder(self, spec: str) -> Encoder:
        """``spec`` loaded once per run; the curation encoder and the teacher when they are the same model share it
        (behind a memo saved to the run folder, :meth:`save_memo`)."""
        if spec not in self._encoders:
            if spec == HASHING:
                from care.encoders.hashing import HashingCharEncoder

                self._encoders[spec] = HashingCharEncoder()
            else:
                from care.encoders.registry import load_model

                model = load_model(spec)
                if not isinstance(model, Encoder):
                    raise CareError(f"{spec!r} is lexical; the curation encoder and the teacher must be dense encoders")
                name = "".join(c if c.isalnum() else "_" for c in spec)[:40]
                self._encoders[spec] = MemoEncoder(model, self.cache_dir() / f"{name}_{MEMO_FILE}")
        return self._encoders[spec]

    def cache_dir(self, *parts: str) -> Path:
        """``config.cache_dir`` (shared by runs) or ``<run>/cache``, with ``parts`` appended; created."""
        root = Path(self.config.cache_dir) if self.config.cache_dir else self.root / "cache"
        path = root.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def curation_encoder(self) -> Encoder:
        """The encoder of the diversity filter, the candidate retrieval and the offline judge."""
        return self.shared_encoder(self.config.curate.encoder)

    def judge_thresholds(self) -> dict[str, float]:
        if self.config.curate.judge_thresholds is not None:
            return dict(self.config.curate.judge_thresholds)
        return dict(HASHING_JUDGE_THRESHOLDS if self.config.curate.encoder == HASHING else E5_JUDGE_THRESHOLDS)

    def save_memo(self) -> None:
        """Persist every memo of the run's shared encoders."""
        for encoder in self._encoders.values():
            if isinstance(encoder, MemoEncoder):
                encoder.save()

    def memo_of(self, spec: str) -> Encoder | None:
        """The run's loaded encoder of ``spec``, when one is (the memo answers texts it already encoded)."""
        return self._encoders.get(spec)

    @property
    def train_file(self) -> Path:
        """The training file written by the label step: every labelled row but the validation split's."""
        return self.root / "label" / "train.jsonl"

    @property
    def labelled_file(self) -> Path:
        """Every labelled row, before the validation split is held out."""
        return self.root / "label" / "all.jsonl"

    @property
    def validation_dir(self) -> Path:
        """The validation split of the label step (:mod:`care.train.recipes.validation`)."""
        return self.root / "label" / "validation"

    @property
    def validation_task(self) -> Path | None:
        """The validation task folder, when the label step carved one."""
        from care.train.recipes.validation import TASK_FOLDER

        task = self.validation_dir / TASK_FOLDER
        return task if (task / "qrels.tsv").is_file() else None

    def model_dir(self, *parts: str) -> Path:
        return self.root.joinpath("models", *parts)

    def require(self, path: Path, step: str) -> Path:
        """``path`` when it exists, else an error naming the step that makes it."""
        if not path.exists():
            raise CareError(f"{path} is missing: run the {step!r} step first (--step {step})")
        return path

    def step_outputs(self, step: str) -> dict[str, Any]:
        """The outputs a finished step recorded in the manifest (empty when it has not finished)."""
        if self.manifest is None or not self.manifest.is_done(step):
            return {}
        return self.manifest.steps[step].outputs

    def trained_models(self) -> dict[str, str]:
        """``{row label: model spec}`` of every model the finished train steps produced, in step order."""
        models: dict[str, str] = {}
        for step in ("train_care", "train_student", "train_baselines"):
            models.update(self.step_outputs(step).get("models", {}))
        return models

    def all_models(self) -> dict[str, str]:
        """The reference models, then the trained ones (the table's rows)."""
        return {**self.config.models.references, **self.trained_models()}
