"""The unanimous rule and the agreement statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from care.curate.judges.agreement import agreement_report, cohen_kappa, fleiss_kappa
from care.curate.judges.voting import NEGATIVE, POSITIVE, VotingConfig, unanimous_label
from care.errors import CareError


def test_unanimous_rule_and_grade_mapping():
    v = VotingConfig()
    assert unanimous_label(["S", "A", "S"], v) == (POSITIVE, 2)  # the lowest agreed score
    assert unanimous_label(["C", "D", "D"], v) == (NEGATIVE, 0)
    assert unanimous_label(["S", "S", "B"], v) == (None, 0)  # B is neither: discarded
    assert unanimous_label(["S", "D"], v) == (None, 0)
    strict = VotingConfig(positive_grades=("S",), negative_grades=("B", "C", "D"), scores={"S": 1})
    assert unanimous_label(["S", "A"], strict) == (None, 0)
    assert unanimous_label(["B", "D"], strict) == (NEGATIVE, 0)
    with pytest.raises(CareError):
        VotingConfig(positive_grades=("S", "C"), negative_grades=("C",))


def test_kappas_against_hand_computation():
    # two raters, four items: S/S, S/D, D/D, D/D
    a, b = ["S", "S", "D", "D"], ["S", "D", "D", "D"]
    # Cohen: po = 3/4, pe = (2/4)(1/4) + (2/4)(3/4) = 1/2 -> (0.75 - 0.5) / 0.5 = 0.5
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    # Fleiss: p_S = 3/8, p_D = 5/8, Pe = 34/64; P_i = 1, 0, 1, 1 -> (0.75 - 34/64) / (1 - 34/64) = 7/15
    assert fleiss_kappa(list(zip(a, b))) == pytest.approx(7 / 15)
    assert cohen_kappa(["S", "S"], ["S", "S"]) == 1.0
    assert math.isnan(fleiss_kappa([["S"], ["A"]]))


def test_agreement_report_shapes():
    grades = {"j1": ["S", "A", "D", "C"], "j2": ["S", "B", "D", "D"], "j3": ["A", "A", "C", "D"]}
    rep = agreement_report(grades, VotingConfig())
    assert rep["pairs"] == 4 and set(rep["cohen_kappa"]) == {"j1|j2", "j1|j3", "j2|j3"}
    assert rep["cohen_kappa"]["j1|j2"]["exact_agreement"] == 0.5
    assert rep["grade_distribution"]["j2"] == {"S": 1, "A": 0, "B": 1, "C": 0, "D": 2}
    # binary: items are (P,P,P), (P,N,P), (N,N,N), (N,N,N)
    assert rep["fleiss_kappa_binary"] == pytest.approx(fleiss_kappa([["P"] * 3, ["P", "N", "P"], ["N"] * 3, ["N"] * 3], ("P", "N")))


def test_single_judge_report_has_no_nan():
    import json

    rep = agreement_report({"only": ["S", "D"]}, VotingConfig())
    assert rep["fleiss_kappa"] is None and rep["cohen_kappa"] == {}
    json.dumps(rep, allow_nan=False)
