"""Hard negatives mined by a trained model, with likely false negatives filtered out.

Stage II trains on ``(q, d⁺, d⁻)`` triples. Negatives taken from BM25 or from the raw top of a dense
ranking are often *unlabelled positives* — on consultation data many answers are near-duplicates of
the labelled one — and pushing those away hurts. :func:`mine_hard_negatives` therefore ranks the
corpus with a model (typically the fine-tuned document tower, which encodes both queries and
documents) and keeps a candidate only when it scores clearly below the labelled positive: with
``relative_margin = m`` a candidate ``c`` of query ``q`` is kept iff

    s(q, c) < s(q, d⁺) − |s(q, d⁺)| · m

(NV-Retriever's "TopK-PercPos" at m = 0.05, the setting its authors found best), and with
``absolute_margin = a`` iff ``s(q, c) < s(q, d⁺) − a``; then the top ``n`` remaining candidates are the
row's ``neg``. On cosine models with crowded scores (e5) 5 % is a wide band: on the dev set most
candidates of the top 100 sit inside it, so a looser margin or a deeper ``range_max`` is what leaves
negatives to keep (``docs/lab-notes.md``, 2026-11-27, "A looser mining filter"). The search, the margin and the ranking are
sentence-transformers' :func:`sentence_transformers.util.mine_hard_negatives`; this module feeds it a
training file and writes the result back in the training format. A row for which no candidate
passes the filter (every candidate in ranks ``range_min``..``range_max`` scores within the margin)
gets ``DEFAULT_FALLBACK`` random corpus documents,
counted in the returned :class:`MiningReport`.
"""

from __future__ import annotations

import json
import logging
import random
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from care.data.io import write_json
from care.data.training import load_training_file, write_training_file
from care.errors import CareError

logger = logging.getLogger(__name__)

#: NV-Retriever's best setting: negatives must score 5 % (of the positive's score) below the positive.
DEFAULT_RELATIVE_MARGIN = 0.05
#: Candidates considered per query (ranks 0..range_max of the model's ranking).
DEFAULT_RANGE_MAX = 100
#: Random documents given to a row whose every candidate failed the filter.
DEFAULT_FALLBACK = 1
#: Share of rows falling back to random documents above which mining warns that the filter is too strict.
FALLBACK_WARNING_SHARE = 0.25


@dataclass
class MiningConfig:
    """How negatives are mined (round-trips to a dict; recorded next to the mined file).

    Attributes:
        n_negatives: negatives kept per row (the best-ranked that pass the filter).
        relative_margin: see the module docstring; ``None`` keeps candidates however close they score.
        absolute_margin: see the module docstring; ``None`` (the default) applies no absolute margin.
        range_min: ranks skipped at the top of the ranking (0: none).
        range_max: deepest rank considered.
        query_prompt / document_prompt: prefixes the model expects (e5: ``"query: "`` / ``"passage: "``).
        batch_size: encoding batch size.
        seed: seed of the random fallback documents.
    """

    n_negatives: int = 7
    relative_margin: float | None = DEFAULT_RELATIVE_MARGIN
    absolute_margin: float | None = None
    range_min: int = 0
    range_max: int = DEFAULT_RANGE_MAX
    query_prompt: str | None = None
    document_prompt: str | None = None
    batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_negatives <= 0:
            raise CareError(f"mining: n_negatives must be > 0, got {self.n_negatives}")
        if self.range_max - self.range_min < self.n_negatives:
            raise CareError(f"mining: range_max - range_min ({self.range_max} - {self.range_min}) must leave at least "
                            f"n_negatives = {self.n_negatives} candidates")
        for name in ("relative_margin", "absolute_margin"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                raise CareError(f"mining: {name} must be in [0, 1) (a share of the positive's score, or a cosine "
                                f"difference), got {value}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mining_record(target: str | Path) -> Path:
    """Where :func:`mine_hard_negatives` records the config and report of the mined file ``target``."""
    return Path(f"{target}.mining.json")


def is_mined_with(target: str | Path, config: MiningConfig) -> bool:
    """Whether ``target`` exists and was mined with ``config`` (its record says so), so a rerun may reuse
    it; a file mined with other settings (another margin, depth or count) is not reused. The model and
    the training file are not compared: callers keep one mined file per document tower and training file
    (the recipe's output folder, whose recorded settings a rerun may not change; the benchmark's seed folder)."""
    record = mining_record(target)
    if not Path(target).is_file() or not record.is_file():
        return False
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))["config"]
    except (ValueError, KeyError, TypeError):
        return False
    return {**MiningConfig().to_dict(), **recorded} == config.to_dict()


@dataclass
class MiningReport:
    """What :func:`mine_hard_negatives` did."""

    rows: int
    mined_rows: int
    fallback_rows: int
    mean_negatives: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mine_hard_negatives(train_file: str | Path, corpus: list[str] | str | Path, model, target: str | Path,
                        config: MiningConfig | None = None) -> MiningReport:
    """Write ``train_file`` with each row's ``neg`` replaced by negatives mined with ``model``.

    Args:
        train_file: training JSONL (read by :mod:`care.data.training`: ``pos`` or ``positive``, a string
            or a list); ``prompt``, ``type`` and ``pos_scores`` are kept.
        corpus: candidate documents, or a ``corpus.jsonl`` (``id``, ``text``; titles joined as
            :attr:`care.data.retrieval.Document.full_text`) to read them from; the rows' positives are
            added when missing.
        model: a ``SentenceTransformer`` (e.g. the fine-tuned document tower) or a path to one.
        target: the mined file (written atomically) — ``<target>.mining.json`` records config and report.
        config: :class:`MiningConfig`.
    Returns:
        The :class:`MiningReport`.
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives as st_mine

    config = config or MiningConfig()
    rows = load_training_file(train_file)
    if isinstance(corpus, (str, Path)):
        from care.data.retrieval import load_corpus

        corpus = [doc.full_text for doc in load_corpus(corpus).values()]
    if isinstance(model, (str, Path)):
        model = SentenceTransformer(str(model))
    pairs = Dataset.from_dict({"query": [r.query for r in rows], "positive": [r.pos[0] for r in rows]})
    pool = list(dict.fromkeys([*corpus, *(p for r in rows for p in r.pos)]))
    mined = st_mine(pairs, model, corpus=pool, range_min=config.range_min, range_max=config.range_max,
                    relative_margin=config.relative_margin, absolute_margin=config.absolute_margin,
                    num_negatives=config.n_negatives,
                    sampling_strategy="top", query_prompt=config.query_prompt, corpus_prompt=config.document_prompt,
                    batch_size=config.batch_size, output_format="triplet", verbose=False)
    found: dict[str, list[str]] = defaultdict(list)
    for query, negative in zip(mined["query"], mined["negative"]):
        if negative not in found[query]:
            found[query].append(negative)
    rng = random.Random(config.seed)
    out, fallback = [], 0
    for row in rows:
        negatives = [n for n in found.get(row.query, []) if n not in row.pos][:config.n_negatives]
        if not negatives:
            fallback += 1
            while len(negatives) < DEFAULT_FALLBACK:
                candidate = rng.choice(pool)
                if candidate not in row.pos:
                    negatives.append(candidate)
        out.append(replace(row, neg=tuple(negatives), neg_scores=None))
    write_training_file(target, out)
    report = MiningReport(len(rows), len(rows) - fallback, fallback,
                          sum(len(r.neg) for r in out) / len(out))
    write_json(mining_record(target), {"config": config.to_dict(), "report": report.to_dict()})
    logger.info("mined negatives for %d rows into %s (%d rows fell back to random documents, %.1f negatives a row)",
                report.rows, target, fallback, report.mean_negatives)
    if fallback > FALLBACK_WARNING_SHARE * len(rows):
        logger.warning("%d of %d rows (%.0f %%) found no candidate in ranks %d-%d scoring below the margin and got a "
                       "random document instead; loosen the margin (relative_margin, e.g. 0.02: care train mine --margin, "
                       "the recipe's --mine-margin) or search deeper (range_max: --depth, --mine-depth)", fallback, len(rows), 100 * fallback / len(rows),
                       config.range_min, config.range_max)
    return report
