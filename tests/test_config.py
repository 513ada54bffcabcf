"""The one config base: typed round trip, overrides, errors that name the field and the file, save."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
import yaml

from care.config import Config, ConfigError, apply_overrides, build


@dataclass
class Inner(Config):
    lr: float = 1e-4
    dims: list[int] | None = None


@dataclass
class Outer(Config):
    name: str = "run"
    epochs: int = 1
    mode: Literal["fast", "slow"] = "fast"
    inner: Inner = field(default_factory=Inner)
    weights: dict[str, float] = field(default_factory=dict)
    pair: tuple[int, ...] = (1, 2)
    folder: Path | None = None

    def validate(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"config field 'epochs': must be >= 1, got {self.epochs}")


@dataclass
class SpecOptions(Config):
    PARSE_STRINGS = True
    KEY_NOUN = "option"

    max_length: int | None = None
    normalize: bool = True
    scale: float = 1.0


def test_round_trip_through_dict_yaml_and_json(tmp_path):
    config = Outer(name="x", epochs=3, mode="slow", inner=Inner(lr=2e-5, dims=[32, 64]), weights={"a": 0.5},
                   pair=(3, 4), folder=Path("out"))
    assert Outer.from_dict(config.to_dict()) == config
    config.save(tmp_path / "c.yaml")
    config.save(tmp_path / "c.json")
    assert Outer.load(tmp_path / "c.yaml") == config == Outer.load(tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text())["inner"] == {"lr": 2e-5, "dims": [32, 64]}


def test_values_are_converted_to_the_field_types():
    config = Outer.from_dict({"inner": {"lr": "3e-4"}, "pair": [5, 6, 7], "folder": "runs/a", "weights": {"a": 1}})
    assert config.inner.lr == 3e-4 and config.pair == (5, 6, 7) and config.folder == Path("runs/a")
    assert config.weights == {"a": 1.0} and isinstance(config.weights["a"], float)


@pytest.mark.parametrize(("data", "message"), [
    ({"epochs": "three"}, "config field 'epochs': expected an integer, got 'three'"),
    ({"epochs": True}, "config field 'epochs': expected an integer"),
    ({"mode": "medium"}, "config field 'mode': must be one of fast, slow; got 'medium'"),
    ({"inner": {"lr": "fast"}}, "config field 'inner.lr': expected a number, got 'fast'"),
    ({"inner": {"dims": [1, "x"]}}, r"config field 'inner.dims\[1\]': expected an integer"),
    ({"inner": {"rate": 1}}, "unknown field 'inner.rate'; valid fields are: dims, lr"),
    ({"inner": 5}, "config field 'inner': expected a mapping, got int"),
    ({"epochs": 0}, "config field 'epochs': must be >= 1, got 0"),
])
def test_bad_values_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        Outer.from_dict(data)


def test_errors_name_the_file_and_overrides_apply(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("epochs: 2\ninner:\n  lr: 0.01\n", encoding="utf-8")
    assert Outer.load(path, ["inner.dims=[8, 16]", "name=b"]) == Outer(epochs=2, name="b", inner=Inner(0.01, [8, 16]))
    with pytest.raises(ConfigError, match=rf"{path}: config field 'epochs': must be >= 1"):
        Outer.load(path, ["epochs=0"])
    path.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        Outer.load(path)
    with pytest.raises(ConfigError, match="not found"):
        Outer.load(tmp_path / "missing.yaml")


def test_with_overrides_and_bad_overrides():
    config = Outer().with_overrides(["inner.lr=2e-5", "weights.b=0.25"])
    assert config.inner.lr == 2e-5 and config.weights == {"b": 0.25}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_overrides({}, ["epochs"])
    with pytest.raises(ConfigError, match="'name' is not a section"):
        apply_overrides({"name": "x"}, ["name.first=y"])


def test_spec_options_convert_text_and_say_option():
    assert SpecOptions.from_dict({"max_length": "512", "normalize": "false", "scale": "2"}) == SpecOptions(512, False, 2.0)
    assert SpecOptions.from_dict({"max_length": "null"}).max_length is None
    with pytest.raises(ConfigError, match="spec x: unknown option 'pooling'; valid options are: max_length, normalize"):
        SpecOptions.from_dict({"pooling": "cls"}, source="spec x")
    with pytest.raises(ConfigError, match="option 'normalize': expected true/false, got 'maybe'"):
        SpecOptions.from_dict({"normalize": "maybe"})


def test_build_reports_missing_fields_with_a_hint():
    @dataclass
    class Record:
        shard: int
        seconds: float

    assert build(Record, {"shard": 1, "seconds": 2}) == Record(1, 2.0)
    with pytest.raises(ConfigError, match="record.json: incomplete Record: missing field.s. seconds; rebuild it"):
        build(Record, {"shard": 1}, source="record.json", hint="rebuild it")


def test_to_dict_is_plain_data():
    data = Outer(pair=(1,), folder=Path("a")).to_dict()
    assert data["pair"] == [1] and data["folder"] == "a"
    assert yaml.safe_load(Outer(pair=(1,)).to_yaml())["pair"] == [1]
