"""Each metric pinned against a hand-computed case (trec_eval conventions: gain = grade, log2 discount)."""

import math

import pytest

from care.bench.metrics import binarize, correlation_metrics, ranking_metrics, truncate_run
from care.errors import CareError


def test_ndcg_at_10_uses_graded_relevance():
    qrels = {"q": {"a": 2, "b": 1, "c": 0}}
    run = {"q": {"c": 0.9, "b": 0.8, "a": 0.7}}
    # DCG  = 0/log2(2) + 1/log2(3) + 2/log2(4) = 0.63093 + 1.0
    # IDCG = 2/log2(2) + 1/log2(3)             = 2.0 + 0.63093
    expected = (1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3))
    assert ranking_metrics(run, qrels, ["ndcg_at_10"])["ndcg_at_10"] == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx(0.61990, abs=1e-5)


def test_recall_cutoffs_and_relevance_threshold():
    ranked = {f"x{i}": 1.0 - i / 100 for i in range(20)}  # x0 best ... x19
    qrels = {"q": {"x2": 2, "x10": 1}}  # x2 at rank 3, x10 at rank 11
    run = {"q": ranked}
    m = ranking_metrics(run, qrels, ["recall_at_10", "recall_at_100"])
    # 1 of 2 relevant in the top 10, both in the top 100
    assert m["recall_at_10"] == pytest.approx(0.5)
    assert m["recall_at_100"] == pytest.approx(1.0)
    # threshold 2: only x2 (grade 2) is relevant -> found in the top 10
    assert ranking_metrics(run, qrels, ["recall_at_10"], relevance_threshold=2)["recall_at_10"] == pytest.approx(1.0)


def test_mrr_at_10_truncates_the_run():
    ranked = {f"x{i}": 1.0 - i / 100 for i in range(20)}
    qrels = {"q1": {"x2": 1}, "q2": {"x10": 1}}
    run = {"q1": ranked, "q2": ranked}
    # q1: first relevant at rank 3 -> 1/3; q2: at rank 11 -> 0 with the cutoff (1/11 without)
    assert ranking_metrics(run, qrels, ["mrr_at_10"])["mrr_at_10"] == pytest.approx((1 / 3 + 0) / 2)


def test_map_at_10_divides_by_all_relevant():
    ranked = {"a": 0.99, "x": 0.98, "b": 0.97, **{f"y{i}": 0.9 - i / 100 for i in range(8)}, "c": 0.1}
    qrels = {"q": {"a": 1, "b": 1, "c": 1}}  # a rank 1, b rank 3, c rank 12
    # AP@10 = (P@1 + P@3) / |relevant| = (1 + 2/3) / 3
    m = ranking_metrics({"q": ranked}, qrels, ["map_at_10", "map_at_1000"])
    assert m["map_at_10"] == pytest.approx((1 + 2 / 3) / 3)
    # AP@1000 adds c at rank 12 with precision 3/12
    assert m["map_at_1000"] == pytest.approx((1 + 2 / 3 + 3 / 12) / 3)


def test_queries_without_run_count_zero_and_unjudged_queries_are_skipped():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": {"a": 1.0}}  # q2 retrieved nothing; q3 has no relevant doc
    assert ranking_metrics(run, qrels, ["ndcg_at_10"])["ndcg_at_10"] == pytest.approx(0.5)


def test_pearson_and_spearman():
    # pred deviations (-3,-2,-1,6), gold deviations (-1.5,-.5,.5,1.5):
    # pearson = 14 / sqrt(50 * 5); ranks agree exactly -> spearman = 1
    m = correlation_metrics([1, 2, 3, 10], [1, 2, 3, 4])
    assert m["pearson"] == pytest.approx(14 / math.sqrt(250))
    assert m["spearman"] == pytest.approx(1.0)
    # deviations (-1.5,-.5,.5,1.5) vs (-1.5,.5,-.5,1.5): 4 / 5
    m = correlation_metrics([1, 2, 3, 4], [1, 3, 2, 4])
    assert m["pearson"] == pytest.approx(0.8)
    assert m["spearman"] == pytest.approx(0.8)


def test_correlation_rejects_constant_gold():
    with pytest.raises(CareError, match="gold"):
        correlation_metrics([1, 2, 3], [1, 1, 1])


def test_helpers():
    assert binarize({"q": {"a": 3, "b": 1}}, 2) == {"q": {"a": 1, "b": 0}}
    assert list(truncate_run({"q": {"a": 0.1, "b": 0.9, "c": 0.5}}, 2)["q"]) == ["b", "c"]


def test_unknown_metric():
    with pytest.raises(CareError, match="unknown"):
        ranking_metrics({}, {}, ["ndcg_at_5"])
