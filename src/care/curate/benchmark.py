"""``build-benchmark``: pool candidates from several retrievers, judge them with every judge, keep
unanimous labels, and write a CMedTEB-style retrieval task folder, a rerank set and a label report.

Outputs in ``out_dir``:

- ``corpus.jsonl`` (the whole input corpus), ``queries.jsonl`` (queries with at least one
  positive), ``qrels.tsv`` (unanimous positives with their graded score, unanimous negatives with
  score 0; pairs the judges disagree on are left out, i.e. unjudged);
- ``rerank.jsonl``: per query, its positives and up to ``rerank_negatives`` sampled unanimous negatives
  (not written when no query has a negative);
- ``label_report.json``: counts, inter-judge agreement (Fleiss' kappa, pairwise Cohen's kappa),
  per-judge usage and cost, and the settings;
- ``work/``: each retriever's run (reused when the build is restarted) and ``pool.jsonl``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from care.curate.candidate_pool import load_texts, pool_candidates, write_pool
from care.curate.judges.base import Judge, JudgePair
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.labelling import label_pairs
from care.curate.judges.voting import NEGATIVE, POSITIVE, VotingConfig
from care.data.io import write_json
from care.data.rerank import RerankExample, write_rerank
from care.data.retrieval import check_corpus, iter_documents, load_queries, write_retrieval_folder
from care.encoders.base import Encoder, LexicalRetriever
from care.errors import CareError

logger = logging.getLogger(__name__)


@dataclass
class BenchmarkConfig:
    """Settings of :func:`build_benchmark` (the paper pools the top-500 of each retriever)."""

    depth: int = 500
    rerank_negatives: int = 20
    seed: int = 0
    instruction: str | None = None
    voting: VotingConfig = field(default_factory=VotingConfig)

    def __post_init__(self) -> None:
        # --depth 0 judged nothing and --rerank-negatives -2 ended in 'unexpected ValueError' from random.sample
        if self.depth < 1:
            raise CareError(f"build-benchmark: --depth must be at least 1 (the paper pools 500), got {self.depth}")
        if self.rerank_negatives < 0:
            raise CareError(f"build-benchmark: --rerank-negatives must be 0 or more, got {self.rerank_negatives}")


def build_benchmark(
    corpus_path: str | Path,
    queries_path: str | Path,
    retrievers: Sequence[Encoder | LexicalRetriever],
    judges: Sequence[Judge],
    out_dir: str | Path,
    *,
    cache: JudgmentCache | None = None,
    config: BenchmarkConfig | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Build the task folder; returns the label report (also written to ``label_report.json``).

    Raises:
        CareError: no query got a unanimous positive; ``label_report.json`` is written first, since the
            message sends the user to its grades and agreement.
    """
    config = config or BenchmarkConfig()
    if not retrievers or not judges:
        raise CareError("build-benchmark needs at least one retriever and one judge")
    out_dir = Path(out_dir)
    check_corpus(corpus_path)  # a bad corpus (e.g. a repeated id) is refused before any retrieval or judging
    queries = load_queries(queries_path)
    pool = pool_candidates(retrievers, corpus_path, queries, config.depth, work_dir=out_dir / "work",
                           instruction=config.instruction, show_progress=show_progress)
    write_pool(out_dir / "work" / "pool.jsonl", pool)
    texts = load_texts(corpus_path, {d for docs in pool.values() for d in docs})
    pairs = [JudgePair(q, queries[q], d, texts[d]) for q, docs in pool.items() for d in docs]
    labelled = label_pairs(judges, pairs, cache, config.voting, show_progress=show_progress)

    positives: dict[str, dict[str, int]] = {}
    negatives: dict[str, list[str]] = {}
    for (qid, did), (label, score) in labelled.labels.items():
        if label == POSITIVE:
            positives.setdefault(qid, {})[did] = score
        elif label == NEGATIVE:
            negatives.setdefault(qid, []).append(did)
    kept = [q for q in queries if q in positives]
    report: dict[str, Any] = {
        "queries_in": len(queries),
        "queries_with_positive": len(kept),
        "pooled_pairs": len(pairs),
        "rerank_queries": 0,
        **labelled.summary(config.voting),
        "retrievers": [r.name for r in retrievers],
        "judges": [j.id for j in judges],
        "config": {**asdict(config), "voting": config.voting.to_dict()},
    }
    report_path = out_dir / "label_report.json"
    if not kept:
        write_json(report_path, report)  # the grades and agreement that the message sends the user to
        raise CareError(f"no query got a unanimous positive among {len(pairs)} pooled pairs; the judges' grades and "
                        f"agreement are in {report_path}: loosen the judges (their thresholds or voting."
                        "positive_grades in the judges config) or pool deeper (--depth)")

    qrels = {q: {**positives[q], **dict.fromkeys(negatives.get(q, []), 0)} for q in kept}
    write_retrieval_folder(out_dir, iter_documents(corpus_path), {q: queries[q] for q in kept}, qrels)
    rng = random.Random(config.seed)
    rerank_rows = []
    for q in kept:
        negs = negatives.get(q, [])
        if not negs:
            continue
        sample = rng.sample(negs, min(config.rerank_negatives, len(negs)))
        rerank_rows.append(RerankExample(queries[q], tuple(texts[d] for d in positives[q]),
                                         tuple(texts[d] for d in sample)))
    if rerank_rows:
        write_rerank(out_dir / "rerank.jsonl", rerank_rows)
    else:  # an empty rerank.jsonl is a file every reader refuses ("no rerank examples")
        (out_dir / "rerank.jsonl").unlink(missing_ok=True)
        logger.warning("benchmark: no query has a unanimous negative, so no rerank.jsonl is written; pool deeper "
                       "(--depth) for negatives")
    report["rerank_queries"] = len(rerank_rows)
    write_json(report_path, report)
    logger.info("benchmark: %d/%d queries with positives, %d positives, %d negatives, %d discarded",
                len(kept), len(queries), report["positives"], report["negatives"], report["discarded_disagreement"])
    return report
