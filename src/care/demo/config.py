"""Generator settings for the demo benchmark (a dataclass that round-trips to JSON)."""

from __future__ import annotations

from dataclasses import dataclass

from care.config import Config
from care.errors import CareError

DEFAULT_SEED = 2026


@dataclass(frozen=True)
class DemoConfig(Config):
    """Sizes and probabilities of the generated demo; the defaults produce the shipped files.

    Attributes:
        seed: master seed; every component draws from its own stream derived from it.
        docs_per_cell_min / docs_per_cell_max: documents written per (condition, aspect) cell.
        facts_per_doc_min / facts_per_doc_max: fact sentences composed into one document.
        aspect_opening_prob: chance a document opens with an aspect-specific sentence instead
            of a plain greeting.
        query_prefix_prob: chance a question starts with a polite prefix (``请问``).
        bench_queries_per_cell: benchmark questions per cell (distinct templates).
        rerank_queries: benchmark questions that also get a rerank example.
        rerank_hard_negatives / rerank_easy_negatives: negatives per rerank example.
        sts_seeds_per_group: seed questions per synonym group (each gives three pairs).
        sts_length_tolerance: allowed relative length change of a generated STS sentence.
        sts_positive_score / sts_hard_negative_score / sts_easy_negative_score: gold scores.
        train_queries_per_cell: training questions per cell (templates disjoint from the benchmark's).
        train_docs_per_cell: training answers per cell (texts distinct from the corpus).
        train_negatives: hard negatives per training row (CARE Stage II uses 7).
        raw_queries_per_cell: unlabelled questions per cell for curation demos.
        raw_context_prob / raw_pii_prob: chance a raw question has an age context / synthetic
            personal details.
    """

    seed: int = DEFAULT_SEED
    docs_per_cell_min: int = 2
    docs_per_cell_max: int = 3
    facts_per_doc_min: int = 2
    facts_per_doc_max: int = 3
    aspect_opening_prob: float = 0.5
    query_prefix_prob: float = 0.3
    bench_queries_per_cell: int = 2
    rerank_queries: int = 160
    rerank_hard_negatives: int = 6
    rerank_easy_negatives: int = 2
    sts_seeds_per_group: int = 1
    sts_length_tolerance: float = 0.3
    sts_positive_score: float = 1.0
    sts_hard_negative_score: float = 0.0
    sts_easy_negative_score: float = 0.0
    train_queries_per_cell: int = 3
    train_docs_per_cell: int = 3
    train_negatives: int = 7
    raw_queries_per_cell: int = 2
    raw_context_prob: float = 0.4
    raw_pii_prob: float = 0.15

    def __post_init__(self) -> None:
        if not 1 <= self.docs_per_cell_min <= self.docs_per_cell_max:
            raise CareError("docs_per_cell_min must be >= 1 and <= docs_per_cell_max")
        if not 1 <= self.facts_per_doc_min <= self.facts_per_doc_max:
            raise CareError("facts_per_doc_min must be >= 1 and <= facts_per_doc_max")
        for name in ("aspect_opening_prob", "query_prefix_prob", "raw_context_prob", "raw_pii_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise CareError(f"{name} must be a probability in [0, 1]")
        if not 0.0 < self.sts_length_tolerance < 1.0:
            raise CareError("sts_length_tolerance must be in (0, 1)")

    def stream(self, component: str) -> str:
        """Seed string of one component's random stream (stable across Python runs)."""
        return f"{self.seed}:{component}"
