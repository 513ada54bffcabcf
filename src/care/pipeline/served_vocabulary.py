"""``recipes.care.prune_query_vocabulary``: the CARE model a run serves, its query tower cut to the run's vocabulary.

A small query tower is mostly token table: e5's 1-layer cut holds 98 M parameters, 96 M of them XLM-R's 250 k
pieces, of which one corpus uses a few percent. When the setting is on (the default under a query-latency budget,
``recipes.care.query_speedup``: the served tower is the small one), the ``train_care`` step ends by writing
``models/care/served/``: CARE's final model (``recipes.care.labels.stage2``) with its query route cut to the pieces
the run's own texts use (:func:`care.models.vocab_prune.prune_vocabulary`) — the corpus to index, every labelled
training row (the validation split's too), ``inputs.alignment_queries`` — each alone and after the query prefix the
model was trained with. Never the evaluation tasks' queries: the test split is unseen text, re-segmented into the
kept pieces (``<unk>`` for characters none covers), so its score is the honest one.

The CARE row of the run (evaluated, timed, exported to ONNX and indexed by the later steps) is that folder; its
document route is copied unchanged, so the index holds the same document vectors. The full-vocabulary model stays
in ``models/care/stage2/``. The cut is ``train_care``'s :data:`OUTPUT_KEY` output in ``manifest.json`` (vocabulary
and weight-file sizes before / after) and a line of ``results.md`` (:func:`report_lines`).
"""

from __future__ import annotations

import functools
import logging
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


def prune_served_query(ctx: RunContext, models: dict[str, str]) -> dict[str, Any] | None:
    """Write ``models/care/served/`` (module docstring) and point ``models``' CARE row at it (in place); the cut as a
    dict, ``None`` when the run has no CARE row."""
    from care.config import ConfigError
    from care.data.text_files import texts_of_files
    from care.encoders.registry import split_options
    from care.encoders.static import is_static_tower
    from care.models.vocab_prune import prune_vocabulary
    from care.pipeline.train import CARE_FOLDER

    label = ctx.config.recipes.care.labels.get("stage2")
    spec = models.get(label) if label else None
    if spec is None:
        logger.info("prune_query_vocabulary: no CARE row (%s) in this run; nothing to cut", label)
        return None
    base, options = split_options(spec)
    if is_static_tower(base):  # a lookup tower: its table is the whole tower, and no transformer holds one to cut
        if ctx.config.recipes.care.prune_query_vocabulary:
            raise ConfigError("recipes.care.prune_query_vocabulary: the CARE row's query tower is a static lookup "
                              f"tower ({base}), which this cut does not handle (it cuts a transformer's token table); "
                              "set it to null or false")
        logger.info("prune_query_vocabulary: the CARE row's query tower is a static lookup tower; served as trained")
        return None
    files = vocabulary_files(ctx)
    target = ctx.model_dir(CARE_FOLDER, SERVED_FOLDER)
    prefix = options.get("query_prefix")
    result = prune_vocabulary(base, texts_of_files(files), target, prefixes=[prefix] if prefix else [])
    _, mark, query = spec.partition("?")
    served = f"{target.resolve()}{mark}{query}"  # the same options (prefixes) on the cut folder
    models[label] = served
    record = {"label": label, "model": served, "full_vocabulary_model": spec,
              "vocabulary_files": [str(f) for f in files], **result.to_dict()}
    record.pop("output")
    return record


def with_served_vocabulary(step: Callable[[RunContext], dict[str, Any]]) -> Callable[[RunContext], dict[str, Any]]:
    """``step`` (``train_care``), then :func:`prune_served_query` on its models when :func:`prune_enabled`; the
    outputs gain the cut (:data:`OUTPUT_KEY`)."""

    @functools.wraps(step)
    def served(ctx: RunContext) -> dict[str, Any]:
        outputs = step(ctx)
        if not prune_enabled(ctx.config.recipes.care):
            return outputs
        models = dict(outputs.get("models", {}))
        cut = prune_served_query(ctx, models)
        return {**outputs, "models": models, OUTPUT_KEY: cut} if cut else outputs

    return served


def report_lines(cut: dict[str, Any] | None) -> list[str]:
    """The report's line on the cut (``results.md``); none without one."""
    if not cut:
        return []
    return [(f"Served query tower cut to the run's vocabulary (`recipes.care.prune_query_vocabulary`): {cut['label']}'s "
             f"query route keeps {cut['vocab_after']:,} of {cut['vocab_before']:,} token rows "
             f"({cut['parameters_before'] / 1e6:.1f} M -> {cut['parameters_after'] / 1e6:.1f} M parameters, weights "
             f"{cut['weights_bytes_before'] / MIB:.1f} -> {cut['weights_bytes_after'] / MIB:.1f} MiB), chosen on "
             f"{cut['texts']:,} texts of {', '.join(Path(f).name for f in cut['vocabulary_files'])}; the evaluation "
             "tasks' queries are not among them. The full-vocabulary model: "
             f"`{cut['full_vocabulary_model']}`."), ""]
