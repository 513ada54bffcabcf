"""A BM25 sanity check: the demo is neither trivial nor impossible for lexical matching."""

from __future__ import annotations

import math

import pytest
import pytrec_eval

from care.data.retrieval import load_retrieval_folder
from care.demo import demo_tasks_root
from care.demo.stats import bm25_run, evaluate_run
from care.demo.tasks import RETRIEVAL_TASK


def test_bm25_ndcg_is_between_trivial_and_impossible() -> None:
    data = load_retrieval_folder(demo_tasks_root() / RETRIEVAL_TASK)
    run = bm25_run(data)
    evaluator = pytrec_eval.RelevanceEvaluator(data.qrels, {"ndcg_cut.10"})
    per_query = evaluator.evaluate(run)
    ndcg = sum(v["ndcg_cut_10"] for v in per_query.values()) / len(per_query)
    assert 0.2 < ndcg < 0.9
    assert abs(evaluate_run(data.qrels, run)["ndcg_at_10"] - ndcg) < 1e-12


def test_evaluate_run_hand_case() -> None:
    qrels = {"q": {"a": 2, "b": 1}}
    run = {"q": {"b": 2.0, "a": 1.0, "c": 0.5}}
    scores = evaluate_run(qrels, run, threshold=2)
    # ranked b (grade 1), a (grade 2), c; trec_eval's nDCG uses the grades as linear gains
    dcg = 1 / math.log2(2) + 2 / math.log2(3)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert scores["ndcg_at_10"] == pytest.approx(dcg / idcg)
    assert scores["mrr_at_10"] == 0.5 and scores["recall_at_100"] == 1.0

