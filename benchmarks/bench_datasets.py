"""What the benchmark scripts share: the datasets (dev set, demo), e5 with the corpus's vectors, e5 cuts — the
package's :mod:`care.experiments.datasets`, re-exported under the drivers' old names."""

from __future__ import annotations

from care.experiments.datasets import (
    Dataset,
    e5_corpus_table,
    e5_cut,
    e5_teacher,
    latency_queries,
    prepare_demo,
    prepare_toyhom,
)

__all__ = ["Dataset", "e5_corpus_table", "e5_cut", "e5_teacher", "latency_queries", "prepare_demo", "prepare_toyhom"]
