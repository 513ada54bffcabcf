"""The recipe's safety net: a validation split carved from the training file, every stage scored on it.

A recipe tuned on one data set can degrade on another (short search queries against page titles: Stage I
took the query tower below the model it started from, and nothing said so). So every recipe run:

1. **carves a validation split** from the training file (:func:`carve_validation`): ``share`` of the
   retrieval rows (5 % by default), as whole connected components of the query–positive graph
   (:func:`care.data.splits.hold_out_components`), so no held-out query or answer is trained on. The
   held-out queries are searched against the run's corpus (their positives added when missing). Every
   stage then trains on the rest (``<folder>/train.jsonl``);
2. **scores every stage** on it (:class:`StageValidator`): the main metric (nDCG@10), Recall@100 and, for
   an asymmetric model, its **alignment fidelity** — the mean cosine between the query tower's vector of a
   validation query and the document tower's own vector of that query (encoded as a query, with the query
   prompt): 1 when the small tower reproduces the large one exactly;
3. **flags** a stage that scores below the stage it started from, and warns when the final model scores
   below the base document model used as it is (e5 zero-shot for e5 towers) or below the symmetric
   small model.

Scores are kept in ``<folder>/scores.json`` keyed by each model's fingerprint, so a resumed recipe scores
only what changed. Scoring costs one corpus encoding per distinct document tower (the base document
model, the initialised one, Stage II's), cut to ``max_documents`` documents on large corpora.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Files of a validation folder.
SPLIT_FILE = "split.json"
TRAIN_FILE = "train.jsonl"
HELD_OUT_FILE = "held_out.jsonl"
TASK_FOLDER = "task"
CORPUS_FILE = "corpus.jsonl"
SCORES_FILE = "scores.json"
#: The metrics recorded per model (the first ranks them).
METRICS: tuple[str, ...] = ("ndcg_at_10", "recall_at_100")
#: Version of the carving rule: a folder carved by another rule is carved again.
CARVE_VERSION = 1
#: Share of the training rows held out by default (issue 43: 5 %, by query).
DEFAULT_VALIDATION_SHARE = 0.05


@dataclass
class ValidationConfig(Config):
    """The safety net's settings (``care train recipe --validation-share``, ``care run``'s ``validation:``).

    Attributes:
        enabled: carve a validation split and score every stage on it.
        share: fraction of the training file's retrieval rows held out, in (0, 1); whole components of
            the query–positive graph are held out, so the share is approximate.
        seed: seed of the split (``null``: the run's seed).
        min_queries: with fewer held-out queries than this, validation is skipped with a warning (a
            handful of queries cannot rank models) and every row trains.
        max_documents: the validation task searches at most this many documents (every positive, then a
            seeded sample of the corpus), bounding the cost of scoring a stage on a large corpus;
            ``null``: the whole corpus.
        fidelity_queries: validation queries used for the alignment fidelity.
        tolerance: a stage is flagged when it scores more than this below the stage it started from.
        batch_size: encoding batch size of the scoring.
    """

    enabled: bool = True
    share: float = DEFAULT_VALIDATION_SHARE
    seed: int | None = None
    min_queries: int = 20
    max_documents: int | None = 50_000
    fidelity_queries: int = 200
    tolerance: float = 0.0
    batch_size: int = 128

    def validate(self) -> None:
        if not 0 < self.share < 1:
            raise ConfigError(f"config field 'validation.share': must be in (0, 1), got {self.share}")
        if self.min_queries < 1 or self.fidelity_queries < 1 or self.batch_size < 1:
            raise ConfigError("config field 'validation': min_queries, fidelity_queries and batch_size must be >= 1")
        if self.max_documents is not None and self.max_documents < 1:
            raise ConfigError("config field 'validation.max_documents': must be >= 1 or null")
        if self.tolerance < 0:
            raise ConfigError("config field 'validation.tolerance': must be >= 0")


@dataclass(frozen=True)
class ValidationSplit:
    """A carved split: the rows to train on and the held-out retrieval task.

    Attributes:
        train_file: the training rows minus the held-out ones.
        task_dir: the held-out queries searched against the corpus (a retrieval task folder).
        rows / held_out: training rows kept / held out.
    """

    train_file: Path
    task_dir: Path
    rows: int
    held_out: int


def _corpus_from_training(examples: Sequence[Any], path: Path) -> Path:
    """A corpus of every distinct positive and negative of the training rows (when the run has none)."""
    from care.data.io import write_jsonl
    from care.data.retrieval import Document, document_row

    texts = dict.fromkeys(t for e in examples for t in (*e.pos, *e.neg))
    write_jsonl(path, (document_row(Document(f"t{i:06d}", text)) for i, text in enumerate(texts)))
    return path


def carve_validation(train_file: str | Path, corpus_file: str | Path | None, folder: str | Path,
                     config: ValidationConfig, *, seed: int = 0) -> ValidationSplit | None:
    """Hold out part of ``train_file`` as a validation task in ``folder`` (once; reused while the training
    file, the corpus and the settings are unchanged).

    Args:
        train_file: the training JSONL (``{"query", "pos", "neg"?}``; alignment rows are never held out).
        corpus_file: what the held-out queries are searched against; ``None``: every distinct positive and
            negative of the training file.
        folder: where the split is written (``train.jsonl``, ``held_out.jsonl``, ``task/``, ``split.json``).
        config: the settings; ``config.seed`` (when set) wins over ``seed``.
        seed: the run's seed.
    Returns:
        The split, or ``None`` when validation is off or too few queries would be held out (warned).
    """
    from care.data.io import write_json
    from care.data.splits import hold_out_components, write_validation_task
    from care.data.training import RETRIEVAL, iter_training_file, write_training_file
    from care.hashes import file_sha256

    if not config.enabled:
        return None
    folder = Path(folder)
    seed = seed if config.seed is None else config.seed
    settings = {"version": CARVE_VERSION, "train_file": str(Path(train_file).resolve()),
                "train_sha256": file_sha256(train_file), "corpus_file": str(Path(corpus_file).resolve()) if corpus_file
                else None, "corpus_sha256": file_sha256(corpus_file) if corpus_file else None,
                "share": config.share, "seed": seed, "max_documents": config.max_documents}
    recorded = _read_json(folder / SPLIT_FILE)
    if recorded is not None and recorded.get("settings") == settings:
        if recorded.get("skipped"):
            return None
        return ValidationSplit(folder / TRAIN_FILE, folder / TASK_FOLDER, recorded["rows"], recorded["held_out"])
    examples = list(iter_training_file(train_file))
    retrieval = [i for i, e in enumerate(examples) if e.kind == RETRIEVAL]
    held_local = hold_out_components([(examples[i].query, examples[i].pos) for i in retrieval], config.share, seed)
    held = {retrieval[i] for i in held_local}
    if len(held) < config.min_queries:
        logger.warning("validation: %s has %d retrieval rows; %.0f %% of them is %d held-out queries, fewer than "
                       "validation.min_queries (%d): no validation split, every row trains and no stage is checked",
                       train_file, len(retrieval), 100 * config.share, len(held), config.min_queries)
        import shutil

        shutil.rmtree(folder / TASK_FOLDER, ignore_errors=True)  # a task carved earlier with other settings
        write_json(folder / SPLIT_FILE, {"settings": settings, "skipped": True, "held_out": len(held)})
        return None
    folder.mkdir(parents=True, exist_ok=True)
    kept = [e for i, e in enumerate(examples) if i not in held]
    held_rows = [examples[i] for i in sorted(held)]
    write_training_file(folder / TRAIN_FILE, kept)
    write_training_file(folder / HELD_OUT_FILE, held_rows)
    corpus = Path(corpus_file) if corpus_file else _corpus_from_training(examples, folder / CORPUS_FILE)
    write_validation_task([e.to_json() for e in held_rows], corpus, folder / TASK_FOLDER, add_missing=True,
                          max_documents=config.max_documents, seed=seed)
    write_json(folder / SPLIT_FILE, {"settings": settings, "rows": len(kept), "held_out": len(held_rows)})
    logger.info("validation: %d of %d training rows held out (%.1f %%, whole query–answer components) -> %s; "
                "the stages train on the other %d", len(held_rows), len(examples), 100 * len(held_rows) / len(examples),
                folder / TASK_FOLDER, len(kept))
    return ValidationSplit(folder / TRAIN_FILE, folder / TASK_FOLDER, len(kept), len(held_rows))


def _read_json(path: Path) -> dict[str, Any] | None:
    import json

    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None


@dataclass
class StageScore:
    """One model's validation scores.

    Attributes:
        label: the row (a recipe stage, or ``base query model`` / ``base document model``).
        spec: the model spec scored.
        scores: :data:`METRICS` on the validation task.
        fidelity: mean query-tower / document-tower cosine on validation queries (asymmetric models only).
        started_from: the label this stage started from (``None`` for the base models).
        delta: ``scores[main] - started_from's`` (``None`` without a start).
        flagged: it scores below its start by more than the tolerance.
        fingerprint: identity of the model (its folders' files), so a rerun rescores only a changed model.
    """

    label: str
    spec: str
    scores: dict[str, float]
    fidelity: float | None = None
    started_from: str | None = None
    delta: float | None = None
    flagged: bool = False
    fingerprint: str = ""

    @property
    def main(self) -> float:
        return self.scores[METRICS[0]]


@dataclass
class StageValidator:
    """Score models on a validation task and keep the scores in ``folder/scores.json``.

    Args:
        task_dir: the validation task folder.
        folder: where scores are kept.
        config: the settings.
        cache_dir: the embedding cache (shared with the run's evaluation, so a tower encodes the corpus once).
        split: the task folder's split to score (``None``: the folder's own; a benchmark scores ``test``).
        instruction: the task instruction models that take one are queried with (``care run`` gives its main
            task's, so the recipe's scores equal the evaluation's); ``None``: none — a model trained with fixed
            prefixes brings its own (:mod:`care.encoders.stored_prompts`).
    """

    task_dir: Path
    folder: Path
    config: ValidationConfig = field(default_factory=ValidationConfig)
    cache_dir: Path | None = None
    show_progress: bool = False
    split: str | None = None
    instruction: str | None = None
    scores: dict[str, StageScore] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.task_dir, self.folder = Path(self.task_dir), Path(self.folder)
        kept = _read_json(self.folder / SCORES_FILE) or {}
        self._kept = {label: StageScore(**row) for label, row in kept.get("models", {}).items()}

    def task(self):
        """The validation task's metadata (with :attr:`instruction`)."""
        from care.bench.registry import infer_task
        from care.bench.task import TaskMetadata

        split = {"split": self.split} if self.split else {}
        return TaskMetadata.from_dict({**infer_task(self.task_dir).to_dict(), "name": "validation",
                                       "path": str(self.task_dir), "instruction": self.instruction, **split})

    def score(self, label: str, spec: str, *, started_from: str | None = None, asymmetric: bool = False) -> StageScore:
        """Score ``spec`` (cached by fingerprint), compare it with ``started_from``, log and keep the result."""
        fingerprint = model_fingerprint(spec)
        kept = self._kept.get(label)
        if kept is not None and kept.fingerprint == fingerprint and kept.spec == spec:
            result = kept
        else:
            result = StageScore(label, spec, self._evaluate(spec), fingerprint=fingerprint)
            if asymmetric:
                result.fidelity = self._fidelity(spec)
        start = self.scores.get(started_from) if started_from else None
        result.started_from = started_from if start is not None else None
        result.delta = round(result.main - start.main, 4) if start is not None else None
        result.flagged = result.delta is not None and result.delta < -self.config.tolerance
        self.scores[label] = result
        self._save()
        fidelity = f", alignment fidelity {result.fidelity:.3f}" if result.fidelity is not None else ""
        compared = (f" ({result.delta:+.4f} vs {started_from})" if result.delta is not None else "")
        logger.info("validation: %s nDCG@10 %.4f%s%s", label, result.main, compared, fidelity)
        if result.flagged:
            logger.warning("validation: %s scores below the stage it started from (%s: %.4f -> %.4f): this stage "
                           "made the model worse on held-out queries", label, started_from, start.main, result.main)
        return result

    def _evaluate(self, spec: str) -> dict[str, float]:
        from care.bench.options import RunOptions
        from care.bench.runner import evaluate
        from care.encoders.cache import EmbeddingCache
        from care.encoders.registry import load_model

        cache = EmbeddingCache(self.cache_dir) if self.cache_dir else None
        options = RunOptions(cache=cache, show_progress=self.show_progress, batch_size=self.config.batch_size)
        result = evaluate(load_model(spec), self.task(), options)
        return {m: round(float(result.scores[m]), 4) for m in METRICS if m in result.scores}

    def _fidelity(self, spec: str) -> float:
        from care.data.retrieval import load_queries

        queries = list(load_queries(self.task_dir / "queries.jsonl").values())[: self.config.fidelity_queries]
        return alignment_fidelity(spec, queries, batch_size=self.config.batch_size)

    def _save(self) -> None:
        from care.data.io import write_json

        models = {**self._kept, **self.scores}
        write_json(self.folder / SCORES_FILE, {"task": str(self.task_dir), "metric": METRICS[0],
                                               "models": {k: asdict(v) for k, v in models.items()}})

    def warnings(self, final: str, references: Iterable[str]) -> list[str]:
        """Why ``final`` should not be served as it is: each of ``references`` it scores below (and each
        flagged stage), as sentences; empty when it holds."""
        out = []
        model = self.scores.get(final)
        if model is None:
            return out
        for reference in references:
            other = self.scores.get(reference)
            if other is not None and model.main < other.main - self.config.tolerance:
                out.append(f"{final} scores below {reference} on validation (nDCG@10 {model.main:.4f} < "
                           f"{other.main:.4f})")
        out += [f"{s.label} scores below {s.started_from}, the stage it started from ({s.delta:+.4f})"
                for s in self.scores.values() if s.flagged]
        return out

    def table(self) -> str:
        """A markdown table of every scored model: nDCG@10, Recall@100, fidelity, change from its start."""
        lines = ["| model | nDCG@10 | Recall@100 | alignment fidelity | vs the stage it started from |",
                 "|---|---|---|---|---|"]
        for s in self.scores.values():
            fidelity = f"{s.fidelity:.3f}" if s.fidelity is not None else "–"
            delta = (f"{s.delta:+.4f} vs {s.started_from}" + (" **(worse)**" if s.flagged else "")
                     if s.delta is not None else "–")
            recall = s.scores.get("recall_at_100")
            lines.append(f"| {s.label} | {s.main:.4f} | {recall:.4f} | {fidelity} | {delta} |" if recall is not None
                         else f"| {s.label} | {s.main:.4f} | – | {fidelity} | {delta} |")
        return "\n".join(lines) + "\n"


def model_fingerprint(spec: str) -> str:
    """Identity of the model folders a spec names (file names, sizes, mtimes) plus the spec itself: a model
    retrained into the same folder gets a new fingerprint."""
    from care.encoders.fingerprint import digest, folder_identity

    folders = [Path(side.removeprefix("onnx:").split("?", 1)[0]) for side in spec.removeprefix("asym:").split("|")]
    return digest({"spec": spec, "folders": [folder_identity(f) if f.is_dir() else str(f) for f in folders]})


def alignment_fidelity(spec: str, queries: Sequence[str], *, batch_size: int = 128) -> float:
    """Mean cosine between the query side's vector of each query and the document side's vector of the same
    query encoded *as a query* (its query prompt): how closely the small tower reproduces the large one.

    Args:
        spec: an asymmetric model: a routed CARE folder, or ``asym:QUERY_SPEC|DOCUMENT_SPEC``.
        queries: validation queries.
    Returns:
        The mean cosine, in [-1, 1].
    """
    import numpy as np

    from care.encoders.sides import load_side

    if not queries:
        raise CareError("alignment fidelity needs at least one query")
    if spec.startswith("asym:"):  # a pair of specs: each side is a whole model
        query_spec, _, document_spec = spec.removeprefix("asym:").partition("|")
        query_side, document_side = load_side(query_spec, "query"), load_side(document_spec, "document")
    else:  # a routed CARE folder: each route alone
        query_side, document_side = load_side(spec, "query"), load_side(spec, "document")
    a = query_side.encode_queries(queries, batch_size=batch_size)
    b = document_side.encode_queries(queries, batch_size=batch_size)
    return round(float(np.mean(np.sum(a * b, axis=1))), 4)


def without_held_out(alignment_file: str | Path, split: ValidationSplit, target: str | Path) -> Path:
    """``alignment_file`` without the rows that hold a held-out query or answer (a user's alignment file built
    from the whole training file would otherwise show the tower the validation queries); written to
    ``target`` once, and the file itself when nothing is dropped."""
    from care.data.training import iter_training_file, write_training_file

    target = Path(target)
    if target.is_file() and target.stat().st_mtime_ns >= Path(alignment_file).stat().st_mtime_ns:
        return target
    held = {t for e in iter_training_file(split.train_file.parent / HELD_OUT_FILE) for t in (e.query, *e.pos)}
    rows = list(iter_training_file(alignment_file))
    kept = [e for e in rows if e.query not in held and not held.intersection(e.pos)]
    if len(kept) == len(rows):
        return Path(alignment_file)
    write_training_file(target, kept)
    logger.info("validation: %d of %d rows of %s hold a validation query or answer; Stage I trains on the other %d "
                "(%s)", len(rows) - len(kept), len(rows), alignment_file, len(kept), target)
    return target
