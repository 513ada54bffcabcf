"""Metrics from the field's libraries: pytrec_eval for ranking, scipy for correlation.

Retrieval / rerank runs are ``{query_id: {doc_id: score}}`` and qrels ``{query_id: {doc_id: grade}}``.

- ``ndcg_at_10``: pytrec_eval ``ndcg_cut_10`` with the graded qrels (gain = grade, log2 discount).
- ``recall_at_k``: pytrec_eval ``recall_k`` — relevant = grade >= the task's ``relevance_threshold``.
- ``mrr_at_10``: pytrec_eval ``recip_rank`` on the run truncated to its top 10 (``recip_rank`` has
  no cutoff of its own).
- ``map_at_k``: pytrec_eval ``map_cut_k`` (denominator = number of relevant documents of the query).
- ``pearson`` / ``spearman``: :func:`scipy.stats.pearsonr` / :func:`scipy.stats.spearmanr`.

Scores are averaged over the queries that have at least one relevant document (pytrec_eval's
convention; queries with no relevant document cannot be scored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytrec_eval
from scipy.stats import pearsonr, spearmanr

from care.errors import CareError

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

MRR_CUTOFF = 10
#: Our metric name -> pytrec_eval measure.
_TREC_MEASURES = {
    "ndcg_at_10": "ndcg_cut_10",
    "recall_at_10": "recall_10",
    "recall_at_100": "recall_100",
    "map_at_10": "map_cut_10",
    "map_at_1000": "map_cut_1000",
}


def binarize(qrels: Qrels, threshold: int) -> dict[str, dict[str, int]]:
    """Grades >= ``threshold`` become 1, others 0 (for binary metrics)."""
    return {q: {d: int(g >= threshold) for d, g in row.items()} for q, row in qrels.items()}


def truncate_run(run: Run, k: int) -> dict[str, dict[str, float]]:
    """Keep each query's ``k`` best-scored documents (ties broken by doc id, so the cut is deterministic)."""
    out = {}
    for q, row in run.items():
        ranked = sorted(row.items(), key=lambda kv: (-kv[1], kv[0]))
        out[q] = dict(ranked[:k])
    return out


def _mean(per_query: dict[str, dict[str, float]], measure: str, qids: Sequence[str]) -> float:
    if not qids:
        return 0.0
    return float(np.mean([per_query.get(q, {}).get(measure, 0.0) for q in qids]))


def ranking_metrics(run: Run, qrels: Qrels, metrics: Sequence[str], *, relevance_threshold: int = 1) -> dict[str, float]:
    """Compute the named ranking metrics (see the module docstring) averaged over scorable queries.

    Queries with a relevant document but no run entry count as 0 (a model that returns nothing
    scores nothing).
    """
    unknown = [m for m in metrics if m not in _TREC_MEASURES and m != "mrr_at_10"]
    if unknown:
        raise CareError(f"unknown ranking metric(s) {unknown}")
    binary = binarize(qrels, relevance_threshold)
    scorable = sorted(q for q, row in binary.items() if any(row.values()))
    run_f = {q: {d: float(s) for d, s in run.get(q, {}).items()} for q in scorable}
    # pytrec_eval drops queries with an empty run; give them a dummy non-relevant entry so they count as 0
    run_f = {q: (row or {"__care_none__": 0.0}) for q, row in run_f.items()}
    out: dict[str, float] = {}
    graded = [m for m in metrics if m == "ndcg_at_10"]
    binary_metrics = [m for m in metrics if m in _TREC_MEASURES and m != "ndcg_at_10"]
    if graded:
        ev = pytrec_eval.RelevanceEvaluator({q: dict(qrels[q]) for q in scorable}, {"ndcg_cut_10"})
        out["ndcg_at_10"] = _mean(ev.evaluate(run_f), "ndcg_cut_10", scorable)
    if binary_metrics:
        measures = {_TREC_MEASURES[m] for m in binary_metrics}
        ev = pytrec_eval.RelevanceEvaluator({q: binary[q] for q in scorable}, measures)
        res = ev.evaluate(run_f)
        for m in binary_metrics:
            out[m] = _mean(res, _TREC_MEASURES[m], scorable)
    if "mrr_at_10" in metrics:
        ev = pytrec_eval.RelevanceEvaluator({q: binary[q] for q in scorable}, {"recip_rank"})
        out["mrr_at_10"] = _mean(ev.evaluate(truncate_run(run_f, MRR_CUTOFF)), "recip_rank", scorable)
    return {m: out[m] for m in metrics}


def correlation_metrics(predicted: Sequence[float], gold: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlation between predicted similarities and gold scores."""
    pred, ref = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if pred.shape != ref.shape or pred.ndim != 1 or len(pred) < 2:
        raise CareError(f"correlation needs two equal-length 1-D score lists (got {pred.shape} and {ref.shape})")
    if np.ptp(ref) == 0:
        raise CareError("all gold STS scores are equal: correlation is undefined")
    if np.ptp(pred) == 0:
        return {"pearson": 0.0, "spearman": 0.0}
    return {"pearson": float(pearsonr(pred, ref)[0]), "spearman": float(spearmanr(pred, ref)[0])}
