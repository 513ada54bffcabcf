"""The selection protocol: a choice's block, the refusal to choose on test without the flag, and the table mark."""

from __future__ import annotations

import pytest

from care.bench.selection import (
    SELECTION_KEY,
    TEST_MARK,
    Selection,
    add_selections,
    chosen_on_test,
    read_selections,
    selection_split,
    with_test_mark,
)
from care.errors import CareError


def test_choosing_on_test_is_refused_without_the_flag_and_validation_always_passes():
    assert selection_split("validation", select_on_test=False, where="probe") == "validation"
    with pytest.raises(CareError, match=r"probe: .*--select-on-test"):
        selection_split("test", select_on_test=False, where="probe")
    assert selection_split("test", select_on_test=True, where="probe") == "test"
    with pytest.raises(CareError, match="validation or test"):
        selection_split("train", select_on_test=True, where="probe")


def test_a_selection_round_trips_and_refuses_what_it_cannot_be():
    choice = Selection("stage1 optim.lr", "validation", "2.4e-3", {"2e-4": 0.22, "2.4e-3": 0.27}, metric="ndcg_at_10")
    extra = add_selections({}, [choice])
    assert read_selections(extra) == [choice]
    with pytest.raises(CareError, match="selected_on must be one of"):
        Selection("lr", "train", "x")
    with pytest.raises(CareError, match="not among the candidates"):
        Selection("lr", "validation", "1e-3", {"2e-4": 0.2})
    with pytest.raises(CareError, match="unknown selection field"):
        read_selections({SELECTION_KEY: [{**choice.to_dict(), "split": "test"}]})


def test_a_row_is_marked_only_where_a_test_choice_touches_it():
    extra = add_selections({}, [Selection("lr", "test", "a", rows=["CARE"]), Selection("v", "validation", "b")])
    assert with_test_mark("0.285", extra, "CARE") == f"0.285{TEST_MARK}"
    assert with_test_mark("0.291", extra, "symmetric large") == "0.291"
    assert [s.setting for s in chosen_on_test(extra)] == ["lr"]
    everything = add_selections({}, [Selection("preset", "test", "x")])  # naming no rows: every row
    assert with_test_mark("0.2", everything, "anything") == f"0.2{TEST_MARK}"
    assert with_test_mark(None, everything, "CARE") is None and with_test_mark("0.2", None) == "0.2"
