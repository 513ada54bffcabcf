"""Typed stage settings: ``[stage:]key=value`` parsed once (which stage, which key, the typed value), selected per
stage, applied to a config dict without a string round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from care.config import ConfigError
from care.train.stage_settings import (
    StageSetting,
    apply_settings,
    for_stage,
    last_value,
    parse_setting,
    parse_settings,
    sets,
)


@pytest.mark.parametrize("item, stage, key, value", [
    ("optim.lr=0.0001", None, "optim.lr", 1e-4),
    ("optim.lr=1e-4", None, "optim.lr", "1e-4"),  # YAML 1.1 reads it as text; the config's float field converts it
    ("stage2:optim.lr=5.0e-5", "stage2", "optim.lr", 5e-5),
    (" stage1 : optim.epochs = 6", "stage1", "optim.epochs", 6),
    ("data.train_file=C:/data/train.jsonl", None, "data.train_file", "C:/data/train.jsonl"),  # ':' in the value
    ("stage1_rank:data.train_file=runs/x:y.jsonl", "stage1_rank", "data.train_file", "runs/x:y.jsonl"),
    ("init_document:model.lora=null", "init_document", "model.lora", None),
    ("loss.matryoshka_dims=[32, 64]", None, "loss.matryoshka_dims", [32, 64]),
    ('model.query_prompt="query: "', None, "model.query_prompt", "query: "),
])
def test_an_item_parses_to_its_stage_key_and_typed_value(item, stage, key, value):
    assert parse_setting(item) == StageSetting(key, value, stage)


@pytest.mark.parametrize("item, words", [("optim.lr", "expected KEY=VALUE"), ("=3", "must not be empty"),
                                         (":optim.lr=3", "must not be empty"), ("optim.lr=[1,", "not valid YAML")])
def test_a_bad_item_is_refused_naming_it_and_the_form(item, words):
    with pytest.raises(ConfigError, match=words) as info:
        parse_settings(["seed=1", item], source="--set")
    assert "--set" in str(info.value) and repr(item) in str(info.value)


def test_a_stage_gets_every_stage_settings_first_then_its_own():
    settings = parse_settings(["stage1:optim.lr=2.4e-3", "optim.lr=1.0e-4", "stage2:optim.lr=5.0e-5", "seed=3"])
    assert [s.value for s in for_stage(settings, "stage1")] == [1e-4, 3, 2.4e-3]  # its own wins when applied
    assert apply_settings({"optim": {"lr": 0.1, "epochs": 2}}, for_stage(settings, "stage1")) == {
        "optim": {"lr": 2.4e-3, "epochs": 2}, "seed": 3}
    assert last_value(settings, "optim.lr", stage="stage2") == 5e-5
    assert last_value(settings, "seed", 0) == 3 and last_value([], "seed", 0) == 0


def test_sets_for_every_stage_the_named_one_or_any():
    settings = parse_settings(["optim.epochs=2", "stage1:optim.lr=2.4e-3", "stage2:data.train_file=t.jsonl"])
    assert sets(settings, "optim.epochs", "stage2")  # set for every stage
    assert sets(settings, "optim.lr", "stage1")
    assert not sets(settings, "optim.lr", "stage2")  # only stage1's
    assert sets(settings, "optim.lr")  # for some stage
    assert not sets(settings, "data.train_file", "stage1")
    assert not sets(settings, "optim", "stage1")  # a whole key, not a prefix
    assert not sets([], "optim.lr", "stage1")


def test_apply_keeps_types_and_refuses_a_value_where_a_section_is():
    data = {"model": {"lora": {"r": 8}}, "optim": {"epochs": 1}}
    out = apply_settings(data, [StageSetting("model.lora", None), StageSetting("data.max_examples", 16)])
    assert out == {"model": {"lora": None}, "optim": {"epochs": 1}, "data": {"max_examples": 16}}
    assert data["model"]["lora"] == {"r": 8}  # a copy
    with pytest.raises(ConfigError, match="'epochs' is not a section"):
        apply_settings(data, {"optim.epochs.x": 1})


@given(stage=st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
       key=st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,2}", fullmatch=True),
       value=st.text(max_size=30))
def test_any_value_leaves_stage_and_key_intact(stage, key, value):
    try:
        setting = parse_setting(f"{stage}:{key}={value}")
    except ConfigError as exc:  # only a value that is not YAML is refused, and it says so
        assert "not valid YAML" in str(exc)
        return
    assert (setting.stage, setting.key) == (stage, key)
    assert StageSetting.from_dict(setting.to_dict()) == setting
