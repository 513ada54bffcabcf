"""The static query tower in a training stage: trained as :class:`~care.models.static_tower.WeightedStaticEmbedding`,
saved as the plain ``StaticEmbedding`` the lookup serves.

A stage whose query model is a static tower folder (a sentence-transformers folder whose first module is
``StaticEmbedding``: ``e5?layers=0``, :func:`care.models.tower_spec.resolve_tower_spec`, or a static tower an earlier
stage saved) trains it as the trainable module (:func:`load_static_tower`)::

    q = normalize( sum_i w[t_i] E[t_i] / sum_i w[t_i] )        (LightRetriever's query side, arXiv 2505.12260)

with per-token weights ``w`` as the stage's ``model`` settings say: ``query_token_weights: idf`` starts them at the
IDF of the stage's query texts (:func:`care.models.static_tower.idf_weights`; else 1), ``learn_query_token_weights``
trains them beside the rows. What a stage saves (:func:`exportable`) folds the weights into the rows, so the
``query/`` folder and the CARE folder's query route load with plain ``SentenceTransformer`` and are served as a
lookup (:class:`care.encoders.static.StaticQueryEncoder`, depth 0 of the frontier).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from care.errors import CareError
from care.train.engine.config import ModelConfig

logger = logging.getLogger(__name__)

#: ``model.query_token_weights`` of a static tower: where its per-token weights start (``None``: no weights, a plain
#: mean, unless ``learn_query_token_weights`` adds them at 1).
IDF = "idf"


def is_static_folder(path: str | Path | None) -> bool:
    """True when ``path`` is a sentence-transformers folder whose first module is ``StaticEmbedding`` (a static tower
    on its own, not a CARE folder whose query route is one)."""
    from care.encoders.static import find_static_module

    if path is None:
        return False
    location = find_static_module(path)
    return location is not None and not location.query_only


def load_static_tower(cfg: ModelConfig, path: str | Path, weight_texts: Callable[[], Iterable[str]] | None = None):
    """The static tower at ``path`` as a trainable ``SentenceTransformer([WeightedStaticEmbedding, ...])`` (the
    folder's later modules, e.g. ``Normalize``, and prompts kept).

    Args:
        cfg: the stage's model settings (``query_token_weights``, ``learn_query_token_weights``).
        path: the static tower's folder.
        weight_texts: the texts the IDF weights are counted over (called only for ``query_token_weights: idf``).
    Raises:
        CareError: IDF weights without texts, or ``freeze_query_embeddings`` (the table is all a static tower has).
    """
    from sentence_transformers import SentenceTransformer

    from care.models.static_tower import WeightedStaticEmbedding, idf_weights

    if cfg.freeze_query_embeddings:
        raise CareError(f"{path}: a static query tower is only its token table; set model.freeze_query_embeddings "
                        "to false to train it")
    saved = SentenceTransformer(str(path), device="cpu")
    first = saved[0]
    table = first.embedding.weight.detach().float().clone()
    weights = None
    if cfg.query_token_weights == IDF:
        if weight_texts is None:
            raise CareError(f"{path}: model.query_token_weights is idf but the stage gave no texts to count them over")
        weights = idf_weights(first.tokenizer, weight_texts(), vocabulary=table.shape[0])
    module = WeightedStaticEmbedding(first.tokenizer, embedding_weights=table, token_weights=weights,
                                     learn_weights=cfg.learn_query_token_weights)
    logger.info("static query tower %s: %d x %d, token weights %s%s", path, table.shape[0], table.shape[1],
                cfg.query_token_weights or "none", " (learned)" if cfg.learn_query_token_weights else "")
    return SentenceTransformer(modules=[module, *list(saved.children())[1:]], device="cpu", prompts=saved.prompts,
                               default_prompt_name=saved.default_prompt_name)


def is_static_model(model: Any) -> bool:
    """True when ``model`` (a sentence-transformers model) starts with a ``StaticEmbedding`` (weighted or plain)."""
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    return len(model) > 0 and isinstance(model[0], StaticEmbedding)


def exportable(model: Any) -> Any:
    """``model`` as it is saved and served: a leading :class:`~care.models.static_tower.WeightedStaticEmbedding`
    replaced by the plain ``StaticEmbedding`` of its folded rows (the same unit vectors; modules shared otherwise);
    any other model unchanged."""
    from sentence_transformers import SentenceTransformer

    from care.models.static_tower import WeightedStaticEmbedding

    if not (len(model) > 0 and isinstance(model[0], WeightedStaticEmbedding)):
        return model
    return SentenceTransformer(modules=[model[0].folded(), *list(model.children())[1:]], device="cpu",
                               prompts=model.prompts, default_prompt_name=model.default_prompt_name)


def static_query_texts(examples: Any, default_prompt: str | None) -> Iterable[str]:
    """Each row's query (``examples``: a training file or an iterable of rows) as the query tower reads it (:func:`care.train.engine.batches.query_text`): what IDF weights
    are counted over."""
    from care.train.engine.batches import query_text

    for example in (examples[i] for i in range(len(examples))) if hasattr(examples, "__getitem__") else examples:
        yield query_text(example.query, example.prompt, example.type, default_prompt)
