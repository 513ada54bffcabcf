"""``recipes.care.prune_query_vocabulary``: the CARE model a run serves, its query tower cut to the run's vocabulary
when validation says the cut keeps quality.

A small query tower is mostly token table: e5's 1-layer cut holds 98 M parameters, 96 M of them XLM-R's 250 k
pieces, of which one corpus uses a few percent. When the setting is on (under a query-latency budget,
``recipes.care.query_speedup``: the served tower is the small one), the ``train_care`` step ends by writing
``models/care/served/``: CARE's final model (``recipes.care.labels.stage2``) with its query route cut to the pieces
the run's own texts use (:func:`care.models.vocab_prune.prune_vocabulary`) — the corpus to index, every labelled
training row (the validation split's too), ``inputs.alignment_queries`` — each alone and after the query prefix the
model was trained with. Never the evaluation tasks' queries: the test split is unseen text, re-segmented into the
kept pieces (``<unk>`` for characters none covers), so its score is the honest one.

A cut can cost quality (issue 58: the demo's test nDCG@10 -0.011 to -0.016), so it is checked on the validation
split the label step carved (:func:`check_on_validation`), as the index step chooses what it serves: a *probe* cut
is made from the same texts minus the validation split's rows (its queries are then unseen text to the probe, as
test queries are to the served cut), CARE is scored uncut and with the probe's query route on the validation
task (nDCG@10; the document route is copied unchanged, so the document vectors come from the run's embedding cache,
keyed by the route's content, instead of being encoded again), and the probe is deleted. ``null`` (the default):
the cut (of all the texts) is served only when the probe scores at least the uncut model's score minus
``recipes.care.prune_tolerance`` (0.003), and not without a validation split (nothing could say it keeps quality);
``true``: always served, the scores reported and a warning when the probe loses more; ``false``: never cut.

When served, the CARE row of the run (evaluated, timed, exported to ONNX and indexed by the later steps) is that
folder; its document route is copied unchanged, so the index holds the same document vectors. The full-vocabulary
model stays in ``models/care/stage2/``. The decision (served or not, why, both validation scores, the tolerance,
``selected_on: validation``) and the cut (vocabulary and weight-file sizes before / after) are ``train_care``'s
:data:`OUTPUT_KEY` output in ``manifest.json`` — a resumed run reads them back with the finished step and does not
check again — and a line of ``results.md`` (:func:`report_lines`).
"""

from __future__ import annotations

import functools
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from care.pipeline.config import CareRecipeConfig
from care.pipeline.context import RunContext

logger = logging.getLogger(__name__)

#: The key of the cut in the ``train_care`` step's outputs.
OUTPUT_KEY = "query_vocabulary"
#: The served model's folder under ``models/care/``.
SERVED_FOLDER = "served"
MIB = 2 ** 20
#: Where the validation check keeps its scores (``scores.json``) under ``models/care/``, and its probe cut there.
CHECK_FOLDER, PROBE_FOLDER = "served_check", "probe"
#: The check's rows in ``served_check/scores.json``.
UNCUT_LABEL, PROBE_LABEL = "uncut", "probe cut"
#: What the cut is chosen on (the decision's ``selected_on``), and the digits its scores are kept to.
SELECTED_ON, SCORE_DIGITS = "validation", 4
#: The validation task's queries.
QUERIES_FILE = "queries.jsonl"


def prune_enabled(recipe: CareRecipeConfig) -> bool:
    """``recipes.care.prune_query_vocabulary``, its ``null`` read as: on exactly when there is a query budget."""
    if recipe.prune_query_vocabulary is not None:
        return recipe.prune_query_vocabulary
    return recipe.query_speedup is not None


def vocabulary_files(ctx: RunContext) -> list[Path]:
    """The files whose texts choose the served vocabulary: the corpus to index, every labelled row (training and
    validation; the training file when the label step kept no ``all.jsonl``), ``inputs.alignment_queries``."""
    from care.pipeline.sources import corpus_file

    labelled = ctx.labelled_file if ctx.labelled_file.is_file() else ctx.require(ctx.train_file, "label")
    return [corpus_file(ctx), labelled, *(Path(f) for f in ctx.config.inputs.alignment_queries)]


def probe_texts(ctx: RunContext) -> list[str]:
    """The probe cut's texts: those of :func:`vocabulary_files` without the validation split's rows — the corpus,
    the training file (``label/train.jsonl``: the labelled rows minus the held-out ones), ``inputs.alignment_queries``
    — less every validation query."""
    from care.data.retrieval import load_queries
    from care.data.text_files import texts_of_files
    from care.pipeline.sources import corpus_file

    task = ctx.validation_task
    held_out = set(load_queries(task / QUERIES_FILE).values()) if task is not None else set()
    files = [corpus_file(ctx), ctx.require(ctx.train_file, "label"), *(Path(f) for f in ctx.config.inputs.alignment_queries)]
    return [text for text in texts_of_files(files) if text not in held_out]


def _care_row(ctx: RunContext, models: dict[str, str]) -> tuple[str, str] | None:
    """``(label, spec)`` of the run's CARE row when its query tower can be cut; ``None`` (logged) otherwise.

    Raises:
        ConfigError: ``prune_query_vocabulary: true`` with a static lookup query tower.
    """
    from care.config import ConfigError
    from care.encoders.registry import split_options
    from care.encoders.static import is_static_tower

    label = ctx.config.recipes.care.labels.get("stage2")
    spec = models.get(label) if label else None
    if spec is None:
        logger.info("prune_query_vocabulary: no CARE row (%s) in this run; nothing to cut", label)
        return None
    base, _ = split_options(spec)
    if is_static_tower(base):  # a lookup tower: its table is the whole tower, and no transformer holds one to cut
        if ctx.config.recipes.care.prune_query_vocabulary:
            raise ConfigError("recipes.care.prune_query_vocabulary: the CARE row's query tower is a static lookup "
                              f"tower ({base}), which this cut does not handle (it cuts a transformer's token table); "
                              "set it to null or false")
        logger.info("prune_query_vocabulary: the CARE row's query tower is a static lookup tower; served as trained")
        return None
    return label, spec


def _cut(spec: str, texts: list[str], target: Path) -> tuple[str, Any]:
    """``(spec of the cut folder, VocabPruneResult)``: ``spec``'s model with its query route cut to ``texts`` (and
    them after the query prefix it was trained with) in ``target``, with ``spec``'s options."""
    from care.encoders.registry import split_options
    from care.models.vocab_prune import prune_vocabulary

    base, options = split_options(spec)
    prefix = options.get("query_prefix")
    result = prune_vocabulary(base, texts, target, prefixes=[prefix] if prefix else [])
    _, mark, query = spec.partition("?")
    return f"{target.resolve()}{mark}{query}", result  # the same options (prefixes) on the cut folder


def cut_served_query(ctx: RunContext, label: str, spec: str, models: dict[str, str]) -> dict[str, Any]:
    """Write ``models/care/served/`` (``spec`` cut to :func:`vocabulary_files`' texts) and point ``models``' row
    ``label`` at it (in place); the cut as a dict."""
    from care.data.text_files import texts_of_files
    from care.pipeline.train import CARE_FOLDER

    files = vocabulary_files(ctx)
    served, result = _cut(spec, texts_of_files(files), ctx.model_dir(CARE_FOLDER, SERVED_FOLDER))
    models[label] = served
    record = {"label": label, "model": served, "full_vocabulary_model": spec,
              "vocabulary_files": [str(f) for f in files], **result.to_dict()}
    record.pop("output")
    return record


def prune_served_query(ctx: RunContext, models: dict[str, str]) -> dict[str, Any] | None:
    """:func:`cut_served_query` on the run's CARE row, unchecked; ``None`` when the run has none it can cut."""
    row = _care_row(ctx, models)
    return None if row is None else cut_served_query(ctx, *row, models)


def check_on_validation(ctx: RunContext, spec: str) -> dict[str, Any] | None:
    """Whether cutting ``spec``'s query vocabulary keeps its quality, on the run's validation split (module
    docstring): the probe cut of :func:`probe_texts` in ``models/care/served_check/probe/`` (deleted after scoring),
    both scored with :class:`care.train.recipes.validation.StageValidator` (scores kept in ``served_check/``, the
    evaluation's embedding cache and validation instruction); ``None`` when the run has no validation split.

    Returns:
        ``{"selected_on": "validation", "metric", "tolerance", "validation": {"uncut", "probe", "delta"},
        "keeps_quality", "probe_texts", "probe_vocab_after", "validation_queries"}``.
    """
    from care.data.retrieval import load_queries
    from care.pipeline.context import EMBEDDINGS_CACHE
    from care.pipeline.sources import VALIDATION_TASK, evaluated_tasks
    from care.pipeline.train import CARE_FOLDER
    from care.train.recipes.validation import METRICS, StageValidator

    task = ctx.validation_task
    if task is None:
        return None
    folder = ctx.model_dir(CARE_FOLDER, CHECK_FOLDER)
    texts = probe_texts(ctx)
    probe, result = _cut(spec, texts, folder / PROBE_FOLDER)
    validator = StageValidator(task, folder, ctx.config.validation, cache_dir=ctx.cache_dir(EMBEDDINGS_CACHE),
                               show_progress=ctx.config.show_progress,
                               instruction=evaluated_tasks(ctx)[VALIDATION_TASK].instruction)
    uncut = validator.score(UNCUT_LABEL, spec).main
    probed = validator.score(PROBE_LABEL, probe).main
    shutil.rmtree(folder / PROBE_FOLDER, ignore_errors=True)  # a whole CARE folder: its document route is large
    tolerance = ctx.config.recipes.care.prune_tolerance
    delta = round(probed - uncut, SCORE_DIGITS)  # the scores have SCORE_DIGITS digits: a delta of -tolerance holds
    return {"selected_on": SELECTED_ON, "metric": METRICS[0], "tolerance": tolerance,
            "validation": {"uncut": uncut, "probe": probed, "delta": delta}, "keeps_quality": delta >= -tolerance,
            "probe_texts": len(texts), "probe_vocab_after": result.vocab_after,
            "validation_queries": len(load_queries(task / QUERIES_FILE))}


def serve_query_cut(ctx: RunContext, models: dict[str, str]) -> dict[str, Any] | None:
    """Decide whether CARE is served with its query vocabulary cut (module docstring) and, when it is, cut it
    (:func:`cut_served_query`, ``models`` updated in place); the decision (with the cut when served) as a dict,
    ``None`` when the run has no CARE row to cut."""
    row = _care_row(ctx, models)
    if row is None:
        return None
    label, spec = row
    setting = ctx.config.recipes.care.prune_query_vocabulary
    check = check_on_validation(ctx, spec)
    tolerance = ctx.config.recipes.care.prune_tolerance
    if check is None:
        served = bool(setting)
        why = ("recipes.care.prune_query_vocabulary: true, unchecked: the run has no validation split" if served else
               "no validation split to check the cut on (validation off, or too few held-out queries); set "
               "recipes.care.prune_query_vocabulary: true to cut it unchecked")
        (logger.info if served else logger.warning)("prune_query_vocabulary: %s", why)
        check = {"selected_on": None, "tolerance": tolerance}
    else:
        scores = check["validation"]
        compared = (f"a probe cut without the validation split's texts scores {scores['probe']:.4f} nDCG@10 on "
                    f"validation against {scores['uncut']:.4f} uncut ({scores['delta']:+.4f}, tolerance {tolerance:g})")
        served = bool(setting) or check["keeps_quality"]
        if check["keeps_quality"]:
            why = f"kept on validation: {compared}"
        elif served:
            why = f"recipes.care.prune_query_vocabulary: true, though it loses more than the tolerance: {compared}"
        else:
            why = (f"not served, it loses more than the tolerance on validation: {compared}; CARE is served with its "
                   "full vocabulary (recipes.care.prune_query_vocabulary: true cuts it anyway)")
        (logger.info if check["keeps_quality"] else logger.warning)("prune_query_vocabulary: %s", why)
    record = {"label": label, "served": served, "decision": why, "full_vocabulary_model": spec, **check}
    if not served:
        from care.pipeline.train import CARE_FOLDER

        shutil.rmtree(ctx.model_dir(CARE_FOLDER, SERVED_FOLDER), ignore_errors=True)  # an earlier attempt's cut
        return record
    return {**record, **cut_served_query(ctx, label, spec, models)}


def with_served_vocabulary(step: Callable[[RunContext], dict[str, Any]]) -> Callable[[RunContext], dict[str, Any]]:
    """``step`` (``train_care``), then :func:`serve_query_cut` on its models when :func:`prune_enabled`; the
    outputs gain the decision (:data:`OUTPUT_KEY`)."""

    @functools.wraps(step)
    def served(ctx: RunContext) -> dict[str, Any]:
        outputs = step(ctx)
        if not prune_enabled(ctx.config.recipes.care):
            return outputs
        models = dict(outputs.get("models", {}))
        decision = serve_query_cut(ctx, models)
        return {**outputs, "models": models, OUTPUT_KEY: decision} if decision else outputs

    return served


def report_lines(cut: dict[str, Any] | None) -> list[str]:
    """The report's line on the cut and its validation check (``results.md``); none without a decision. A record
    written before the check (no ``served``) is a served, unchecked cut."""
    if not cut:
        return []
    decision = f" Validation: {cut['decision']}." if cut.get("decision") else ""
    if not cut.get("served", True):
        return [(f"Query tower not cut to the run's vocabulary (`recipes.care.prune_query_vocabulary`): {cut['label']} "
                 f"is served with its full vocabulary (`{cut['full_vocabulary_model']}`).{decision}"), ""]
    return [(f"Served query tower cut to the run's vocabulary (`recipes.care.prune_query_vocabulary`): {cut['label']}'s "
             f"query route keeps {cut['vocab_after']:,} of {cut['vocab_before']:,} token rows "
             f"({cut['parameters_before'] / 1e6:.1f} M -> {cut['parameters_after'] / 1e6:.1f} M parameters, weights "
             f"{cut['weights_bytes_before'] / MIB:.1f} -> {cut['weights_bytes_after'] / MIB:.1f} MiB), chosen on "
             f"{cut['texts']:,} texts of {', '.join(Path(f).name for f in cut['vocabulary_files'])}; the evaluation "
             "tasks' queries are not among them. The full-vocabulary model: "
             f"`{cut['full_vocabulary_model']}`.{decision}"), ""]
