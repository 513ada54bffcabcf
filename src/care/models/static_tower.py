"""The static query tower: one row per token, a (weighted) mean — built from a transformer's embeddings, trained in
torch, saved as sentence-transformers' ``StaticEmbedding`` and served as a lookup (:mod:`care.encoders.static`).

What it computes (LightRetriever's query side, arXiv 2505.12260; model2vec's token weighting)::

    q = normalize( sum_i w[t_i] E[t_i] / sum_i w[t_i] )      t_1..t_n = tokenizer(prefix + text), no special tokens

* **Built from a BERT-style folder** (:func:`static_tower_from_model`; e5: the ``e5?layers=0`` tower spec,
  :func:`care.models.tower_spec.resolve_tower_spec`): each
  token's row is what the folder's embedding layer gives it on average over the first :data:`POSITION_WINDOW`
  positions, ``E[t] = mean_p LayerNorm(word[t] + position[p] + type[0])`` — a 0-layer cut of the folder (token +
  position embeddings, mean pooling, run through the transformer code: ``care model prune --layers 0``) with the
  position averaged out, so it is a lookup; or from a tiny random config (:func:`random_static_tower`) for tests.
* **Per-token weights** ``w`` (optional): IDF over texts the deployment has (:func:`idf_weights`), and/or learned
  (``learn_weights=True``: a trainable vector, initialised to the given weights or 1).
* **Trained in torch** (:class:`WeightedStaticEmbedding`): an ``nn.EmbeddingBag`` sum with per-sample weights
  divided by the weights' sum per text — the math of :func:`care.encoders.static.lookup_mean` (tested to 1e-5);
  a sentence-transformers input module, so Stage I can put it where a query Transformer + Pooling sat.
* **Saved as sentence-transformers' own modules** (:func:`save_static_tower`): the weights folded into the rows
  (``E[t] * w[t]``: the same vector once normalised), ``StaticEmbedding`` + ``Normalize``, the prefixes as the
  model's prompts and in ``care_prompts.json``, and :data:`RECORD_FILE` saying how it was built. It reloads with a
  plain ``SentenceTransformer(folder)`` (no remote code) to the vectors the lookup gives.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers.sentence_transformer.modules import StaticEmbedding
from torch.nn import functional

from care.errors import CareError

logger = logging.getLogger(__name__)

#: Positions a token's row averages its embedding over (queries are short: the dev sets' median is under this).
POSITION_WINDOW = 32
#: Vocabulary rows turned into static rows per step (bounds the step's memory: rows x POSITION_WINDOW x width).
ROW_CHUNK = 2048
#: What a folder records about how its static tower was built.
RECORD_FILE = "care_static_tower.json"
#: Weight sums below this count as zero (a text of no weighted token gives a zero vector, never NaN).
MIN_WEIGHT_SUM = 1e-12
#: e5's prefixes (what multilingual-e5 was trained with; the static tower keeps reading them).
E5_QUERY_PREFIX, E5_DOCUMENT_PREFIX = "query: ", "passage: "


class WeightedStaticEmbedding(StaticEmbedding):
    """``StaticEmbedding`` with optional per-token weights: the trainable form of the static tower.

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` (or a fast ``transformers`` one).
        embedding_weights: ``(vocabulary, width)`` initial rows.
        embedding_dim: width of random rows when ``embedding_weights`` is None.
        token_weights: ``(vocabulary,)`` initial weights (e.g. :func:`idf_weights`); None: no weights (plain mean).
        learn_weights: train the weights too (initialised to ``token_weights`` or 1).
    """

    def __init__(self, tokenizer: Any, embedding_weights: np.ndarray | torch.Tensor | None = None,
                 embedding_dim: int | None = None, *, token_weights: np.ndarray | torch.Tensor | None = None,
                 learn_weights: bool = False, **kwargs: Any) -> None:
        super().__init__(tokenizer, embedding_weights=embedding_weights, embedding_dim=embedding_dim, **kwargs)
        if token_weights is None and learn_weights:
            token_weights = torch.ones(self.num_embeddings)
        if token_weights is not None:
            weights = torch.as_tensor(np.asarray(token_weights, dtype=np.float32)).reshape(-1)
            if weights.numel() != self.num_embeddings:
                raise CareError(f"token_weights has {weights.numel()} entries but the table {self.num_embeddings} rows")
            self.token_weights = torch.nn.Parameter(weights, requires_grad=learn_weights)
        else:
            self.token_weights = None

    def forward(self, features: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        """``features["sentence_embedding"]``: each text's weighted mean row (not normalised; ``Normalize`` follows)."""
        ids, offsets = features["input_ids"], features["offsets"]
        if self.token_weights is None:
            features["sentence_embedding"] = self.embedding(ids, offsets)
            return features
        weights = self.token_weights[ids]
        summed = functional.embedding_bag(ids, self.embedding.weight, offsets, mode="sum", per_sample_weights=weights)
        lengths = torch.diff(offsets, append=torch.tensor([ids.numel()], dtype=offsets.dtype))
        bags = torch.repeat_interleave(torch.arange(len(offsets)), lengths)
        totals = torch.zeros(len(offsets), dtype=weights.dtype).index_add_(0, bags, weights)
        features["sentence_embedding"] = summed / totals.clamp_min(MIN_WEIGHT_SUM).unsqueeze(1)
        return features

    def save(self, output_path: str, *args: Any, **kwargs: Any) -> None:
        """Write the folded rows in ``StaticEmbedding``'s files (a trainer's checkpoint of a model holding this module
        still names this class in ``modules.json``: build a model from :meth:`folded` to share, as
        :func:`save_static_tower` does)."""
        self.folded().save(output_path, *args, **kwargs)

    def folded(self) -> StaticEmbedding:
        """The plain ``StaticEmbedding`` of the same vectors once normalised: rows ``E[t] * w[t]``."""
        rows = self.embedding.weight.detach().float()
        if self.token_weights is not None:
            rows = rows * self.token_weights.detach().float().unsqueeze(1)
        return StaticEmbedding(self.tokenizer, embedding_weights=rows.clone().contiguous())


def idf_weights(tokenizer: Any, texts: Iterable[str], *, vocabulary: int | None = None) -> np.ndarray:
    """Smoothed inverse document frequency per token id, ``log((1 + N) / (1 + df_t)) + 1`` (scikit-learn's), over
    ``texts`` tokenised as the tower reads them; a token no text has gets the largest value.

    Returns:
        ``(vocabulary,)`` float32 (``vocabulary`` defaults to the tokenizer's size).
    Raises:
        CareError: no texts.
    """
    size = vocabulary or tokenizer.get_vocab_size()
    frequency = np.zeros(size, dtype=np.int64)
    count = 0
    batch: list[str] = []

    def flush() -> None:
        for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
            frequency[np.unique(np.asarray(encoding.ids, dtype=np.intp))] += 1
        batch.clear()

    for text in texts:
        batch.append(text)
        count += 1
        if len(batch) >= ROW_CHUNK:
            flush()
    if batch:
        flush()
    if count == 0:
        raise CareError("IDF weights need at least one text (the corpus or the training queries)")
    return (np.log((1 + count) / (1 + frequency)) + 1).astype(np.float32)


def static_rows(model_folder: str | Path, *, position_window: int = POSITION_WINDOW) -> np.ndarray:
    """``(vocabulary, width)`` float32 rows ``mean_{p < position_window} LayerNorm(word[t] + position[p] + type[0])``
    of a BERT-style folder's embedding layer (no position table: ``position_window`` is ignored; no LayerNorm: none).

    Raises:
        CareError: the folder has no ``embeddings.word_embeddings``.
    """
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_folder))
    embeddings = getattr(model, "embeddings", None)
    word = getattr(embeddings, "word_embeddings", None)
    if word is None:
        raise CareError(f"{model_folder}: no embeddings.word_embeddings (a BERT-style encoder is needed to build a "
                        "static tower from)")
    with torch.no_grad():
        table = word.weight.float()
        shift = torch.zeros(1, 1, table.shape[1])
        types = getattr(embeddings, "token_type_embeddings", None)
        if types is not None:
            shift = shift + types.weight[0].float()
        positions = getattr(embeddings, "position_embeddings", None)
        if positions is not None:
            window = min(position_window, positions.weight.shape[0])
            shift = shift + positions.weight[:window].float().unsqueeze(0)
        norm = getattr(embeddings, "LayerNorm", None)
        rows = []
        for start in range(0, table.shape[0], ROW_CHUNK):
            block = table[start : start + ROW_CHUNK].unsqueeze(1) + shift  # rows x positions x width
            rows.append((norm(block) if norm is not None else block).mean(dim=1))
    return torch.cat(rows).numpy().astype(np.float32)


def _tokenizer_of(model_folder: str | Path) -> Any:
    from tokenizers import Tokenizer

    path = Path(model_folder) / "tokenizer.json"
    if not path.is_file():
        raise CareError(f"{path} is missing: a static tower needs the folder's fast tokenizer (tokenizer.json)")
    return Tokenizer.from_file(str(path))


def static_tower_from_model(model_folder: str | Path, *, position_window: int = POSITION_WINDOW,
                            weight_texts: Iterable[str] | None = None,
                            learn_weights: bool = False) -> WeightedStaticEmbedding:
    """The static tower of a BERT-style folder (:func:`static_rows`), IDF-weighted over ``weight_texts`` when given."""
    tokenizer = _tokenizer_of(model_folder)
    rows = static_rows(model_folder, position_window=position_window)
    weights = None if weight_texts is None else idf_weights(tokenizer, weight_texts, vocabulary=rows.shape[0])
    return WeightedStaticEmbedding(tokenizer, embedding_weights=rows, token_weights=weights, learn_weights=learn_weights)


def random_static_tower(tokenizer: Any, width: int, *, seed: int = 0, learn_weights: bool = False,
                        token_weights: np.ndarray | None = None) -> WeightedStaticEmbedding:
    """A random-init static tower over ``tokenizer`` (tests, or training from scratch)."""
    generator = torch.Generator().manual_seed(seed)
    vocabulary = tokenizer.get_vocab_size() if hasattr(tokenizer, "get_vocab_size") else len(tokenizer)
    rows = torch.randn(vocabulary, width, generator=generator) / math.sqrt(width)
    return WeightedStaticEmbedding(tokenizer, embedding_weights=rows, token_weights=token_weights,
                                   learn_weights=learn_weights)


def save_static_tower(tower: WeightedStaticEmbedding | StaticEmbedding, output: str | Path, *,
                      query_prefix: str = "", document_prefix: str = "", record: dict[str, Any] | None = None) -> Path:
    """Write ``tower`` as a sentence-transformers folder (``StaticEmbedding`` with the weights folded in, then
    ``Normalize``; the prefixes as prompts and in ``care_prompts.json``; ``record`` in :data:`RECORD_FILE`), atomically.

    Returns:
        ``output``; ``SentenceTransformer(output)`` and ``static:output`` give the same unit vectors.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    from care.data.io import write_json
    from care.encoders.stored_prompts import write_stored_prompts
    from care.models.folders import atomic_dir

    module = tower.folded() if isinstance(tower, WeightedStaticEmbedding) else tower
    prompts = {role: prefix for role, prefix in (("query", query_prefix), ("document", document_prefix)) if prefix}
    model = SentenceTransformer(modules=[module, Normalize()], device="cpu", prompts=prompts)
    output = Path(output)
    with atomic_dir(output) as tmp:
        model.save(str(tmp))
        write_stored_prompts(tmp, query_prefix or None, document_prefix or None)
        write_json(Path(tmp) / RECORD_FILE, {"vocabulary": module.num_embeddings, "width": module.embedding_dim,
                                             **(record or {})})
    logger.info("static tower (%d x %d) -> %s", module.num_embeddings, module.embedding_dim, output)
    return output


def build_static_tower(model_folder: str | Path, output: str | Path, *, position_window: int = POSITION_WINDOW,
                       weight_texts: Iterable[str] | None = None, query_prefix: str = "",
                       document_prefix: str = "") -> Path:
    """:func:`static_tower_from_model` saved with :func:`save_static_tower` (the build recorded)."""
    tower = static_tower_from_model(model_folder, position_window=position_window, weight_texts=weight_texts)
    record = {"built_from": Path(model_folder).name, "position_window": position_window,
              "token_weights": "idf" if weight_texts is not None else None}
    return save_static_tower(tower, output, query_prefix=query_prefix, document_prefix=document_prefix, record=record)

