"""The recipe's ``[stage:]key=value`` settings: which stage an override targets and which key it sets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from care.train.overrides import override_key, override_stage, sets_key


@pytest.mark.parametrize("override, stage, key", [
    ("optim.lr=1e-4", None, "optim.lr"),
    ("stage2:optim.lr=5e-5", "stage2", "optim.lr"),
    (" stage1 : optim.epochs = 6", "stage1", "optim.epochs"),
    ("data.train_file=C:/data/train.jsonl", None, "data.train_file"),  # a ':' in the value is not a stage
    ("stage1_rank:data.train_file=runs/x:y.jsonl", "stage1_rank", "data.train_file"),
])
def test_stage_and_key_of_an_override(override, stage, key):
    assert override_stage(override) == stage
    assert override_key(override) == key


def test_sets_key_for_every_stage_or_the_named_one():
    overrides = ["optim.epochs=2", "stage1:optim.lr=2.4e-3", "stage2:data.train_file=t.jsonl"]
    assert sets_key(overrides, "stage2", "optim.epochs")  # set for every stage
    assert sets_key(overrides, "stage1", "optim.lr")
    assert not sets_key(overrides, "stage2", "optim.lr")  # only stage1's
    assert not sets_key(overrides, "stage1", "data.train_file")
    assert not sets_key(overrides, "stage1", "optim")  # a whole key, not a prefix
    assert not sets_key([], "stage1", "optim.lr")


@given(stage=st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
       key=st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,2}", fullmatch=True),
       value=st.text(max_size=30))
def test_any_value_leaves_stage_and_key_intact(stage, key, value):
    assert (override_stage(f"{stage}:{key}={value}"), override_key(f"{stage}:{key}={value}")) == (stage, key)
    assert (override_stage(f"{key}={value}"), override_key(f"{key}={value}")) == (None, key)
