"""Spec strings and spec files -> models; bad specs give errors that list the accepted forms."""

from __future__ import annotations

import json

import numpy as np
import pytest

from care.encoders import registry
from care.encoders.bm25 import BM25Retriever
from care.encoders.hf import HFEncoder
from care.encoders.pair import AsymmetricEncoder
from care.encoders.registry import load_model, split_options
from care.errors import CareError


def test_split_options_decodes_values():
    base, options = split_options("/m/x?pooling=cls&instruction_template=Q%3A+{instruction}%0A{query}&max_length=64")
    assert base == "/m/x"
    assert options == {"pooling": "cls", "instruction_template": "Q: {instruction}\n{query}", "max_length": "64"}
    with pytest.raises(CareError, match="given twice"):
        split_options("bm25?k1=1&k1=2")
    with pytest.raises(CareError, match="key=value"):
        split_options("bm25?k1")


@pytest.mark.parametrize("spec", ["", "faiss:flat", "spec-that-is-missing.yaml"])
def test_unknown_specs_list_the_accepted_forms(spec):
    with pytest.raises(CareError, match="accepted model specs"):
        load_model(spec)


def test_malformed_asym_spec_and_non_dense_side(tiny_bert):
    with pytest.raises(CareError, match="asym:QUERY_SPEC\\|DOC_SPEC"):
        load_model("asym:bm25")
    with pytest.raises(CareError, match="must be a dense encoder"):
        load_model(f"asym:{tiny_bert}|bm25")


def test_runtime_overrides_and_extra_options(tiny_bert):
    encoder = load_model(str(tiny_bert), device="cpu", batch_size=3, options={"pooling": "cls"})
    assert isinstance(encoder, HFEncoder)
    assert encoder.config.batch_size == 3 and encoder.config.device == "cpu" and encoder.config.pooling == "cls"
    with pytest.raises(CareError, match="unknown option.*valid options are:.*max_length"):
        load_model(f"{tiny_bert}?max_len=12")


def test_yaml_spec_file_with_query_and_document_sub_specs(tmp_path, tiny_bert, tiny_qwen3):
    spec = tmp_path / "care-pair.yaml"
    spec.write_text(
        "name: tiny-pair\n"
        "query:\n"
        f"  model: {tiny_bert}\n"
        "  pooling: cls\n"
        "  max_length: 32\n"
        f"document: {tiny_qwen3}?padding_side=left\n",
        encoding="utf-8",
    )
    pair = load_model(str(spec))
    assert isinstance(pair, AsymmetricEncoder) and pair.name == "tiny-pair"
    reference = load_model(f"asym:{tiny_bert}?pooling=cls&max_length=32|{tiny_qwen3}?padding_side=left")
    np.testing.assert_allclose(pair.encode_documents(["头痛"]), reference.encode_documents(["头痛"]), atol=1e-6)
    assert pair.fingerprint == reference.fingerprint


def test_json_spec_file_with_a_relative_model_path(tmp_path, tiny_bert):
    import shutil

    shutil.copytree(tiny_bert, tmp_path / "bert")
    spec = tmp_path / "bert.json"
    spec.write_text(json.dumps({"model": "bert", "pooling": "cls", "query_prefix": "query: "}), encoding="utf-8")
    encoder = load_model(str(spec))
    assert isinstance(encoder, HFEncoder) and encoder.config.model == str(tmp_path / "bert")
    assert encoder.config.query_prefix == "query: "


def test_spec_file_types_and_errors(tmp_path):
    bm25 = tmp_path / "bm25.yaml"
    bm25.write_text("type: bm25\ntokenizer: char\nk1: 1.2\n", encoding="utf-8")
    retriever = load_model(str(bm25))
    assert isinstance(retriever, BM25Retriever) and retriever.config.tokenizer == "char" and retriever.config.k1 == 1.2

    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(CareError, match="must hold a mapping"):
        load_model(str(bad))
    half = tmp_path / "half.yaml"
    half.write_text("type: asymmetric\nquery: bm25\n", encoding="utf-8")
    with pytest.raises(CareError, match="missing document"):
        load_model(str(half))
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("type: splade\n", encoding="utf-8")
    with pytest.raises(CareError, match="unknown type 'splade'"):
        load_model(str(unknown))


def test_unknown_types_and_a_missing_model_field_name_the_kinds(tmp_path):
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("type: splade\n", encoding="utf-8")
    with pytest.raises(CareError, match=r"use one of hf, bm25, e5, openai, onnx, static, asymmetric$"):
        load_model(str(unknown))
    for kind, said in (("hf", "a Hugging Face model spec needs a 'model' field \\(folder or Hub id\\)"),
                       ("onnx", "an ONNX export spec needs a 'model' field \\(its folder\\)")):
        (tmp_path / f"{kind}.yaml").write_text(f"type: {kind}\n", encoding="utf-8")
        with pytest.raises(CareError, match=said):
            load_model(str(tmp_path / f"{kind}.yaml"))


def test_a_new_kind_is_one_table_entry(tmp_path, monkeypatch):
    """An entry in SPEC_KINDS is reached by its prefix, by its names and by its spec-file type; its loader gets the
    base, the merged options, the runtime settings and the source."""
    seen = []

    def load(base, options, runtime, source):
        seen.append((base, dict(options), runtime["batch_size"], source))
        return registry.SPEC_KINDS["bm25"].load("bm25", {}, runtime, source)

    kind = registry.SpecKind("toy", load, ("'toy:NAME'",), names=("toy",), prefix="toy:",
                             file_base=lambda fields, source: "toy:" + fields.pop("name"))
    monkeypatch.setitem(registry.SPEC_KINDS, "toy", kind)
    monkeypatch.setitem(registry._FILE_TYPES, "toy", kind)
    assert isinstance(load_model("toy:a?k=1", batch_size=4), BM25Retriever)
    assert isinstance(load_model("TOY"), BM25Retriever)
    (tmp_path / "toy.yaml").write_text("type: toy\nname: b\nk: 2\n", encoding="utf-8")
    load_model(str(tmp_path / "toy.yaml"))
    assert seen == [("toy:a", {"k": "1"}, 4, "toy:a?k=1"), ("TOY", {}, None, "TOY"),
                    ("toy:b", {"k": 2}, None, str(tmp_path / "toy.yaml"))]


def test_the_accepted_forms_come_from_the_table():
    for kind in registry.SPEC_KINDS.values():
        assert all(form in registry.SPEC_FORMS for form in kind.forms)
        assert all(name in registry.BUILTIN_SPEC_NAMES for name in (*kind.names, kind.prefix) if name)


@pytest.mark.parametrize(("spec", "suggestion"), [("bm26", "'bm25'"), ("e6", "'e5'"), ("openia:text-embedding-3-small",
                                                  "'openai:text-embedding-3-small'"), ("bm25:chars", "'bm25:char'")])
def test_a_mistyped_spec_suggests_close_names_without_asking_the_hub(spec, suggestion, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: pytest.fail("the Hub was asked"))
    with pytest.raises(CareError, match=f"unknown model spec .*did you mean {suggestion}"):
        load_model(spec)


def test_an_uncached_hub_id_fails_fast_when_the_hub_cannot_be_reached(monkeypatch):
    import socket
    import time

    import huggingface_hub

    from care.encoders import model_location

    asked_online: list[bool] = []

    def download(*args, local_files_only=False, **kwargs):
        asked_online.append(not local_files_only)
        raise huggingface_hub.errors.LocalEntryNotFoundError("not cached")

    def unreachable(*args, **kwargs):
        raise OSError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.setattr("urllib.request.getproxies", lambda: {})
    started = time.perf_counter()
    with pytest.raises(CareError, match=r"not in the local Hugging Face cache.*cannot be reached from this machine"):
        load_model("someorg/some-model")
    assert time.perf_counter() - started < model_location.HUB_PROBE_TIMEOUT_S and asked_online == [False, False]
