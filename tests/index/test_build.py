"""care index build: sharded, resumable document encoding (document route only) and the merge step."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from care.data.errors import DataFormatError
from care.encoders.sides import load_side
from care.errors import CareError
from care.index.build import BuildOptions, build, parse_shard, shard_ranges
from care.index.bundle import open_index_folder
from care.index.config import IndexConfig
from care.testing.tiny_model import SAMPLE_DOCS, SAMPLE_QUERIES, make_tiny_care_model, write_corpus


@pytest.fixture(scope="module")
def document_vectors(tiny_care):
    texts = [f"{d['title']} {d['text']}" for d in SAMPLE_DOCS]
    return load_side(str(tiny_care), "document").encode_documents(texts)


def _options(model, corpus, output, **kw):
    return BuildOptions(model=str(model), corpus=corpus, output=output, batch_size=2, chunk_size=2, **kw)


def test_shard_ranges_and_parse():
    assert shard_ranges(8, 3) == [[0, 2], [2, 5], [5, 8]]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "x/2", "1", "-1/2"):
        with pytest.raises(CareError, match="i/N"):
            parse_shard(bad)
    with pytest.raises(CareError, match="at most 3 shards"):
        shard_ranges(3, 4)


def test_query_route_loads_without_the_document_tower(tiny_care, tmp_path):
    copy = tmp_path / "care"
    shutil.copytree(tiny_care, copy)
    for weights in (copy / "document_0_Transformer").glob("*.safetensors"):
        weights.write_bytes(b"corrupt")  # would fail if the document tower were read
    encoder = load_side(str(copy), "query")
    assert encoder.encode_queries(["头痛"]).shape == (1, encoder.dim)


def test_route_spec_options_apply_to_one_route(tiny_care):
    """``FOLDER?query_prefix=...`` keeps the query route and prefixes queries; options a saved route cannot take are refused."""
    import numpy as np

    from care.errors import CareError

    plain = load_side(str(tiny_care), "query")
    prefixed = load_side(f"{tiny_care}?query_prefix=query%3A%20&max_length=16", "query")
    assert prefixed.config.query_prefix == "query: " and prefixed.model.max_seq_length == 16
    assert prefixed.fingerprint != plain.fingerprint
    by_hand = plain.model.encode_query(["query: 头痛"], prompt="", convert_to_numpy=True)
    by_hand /= np.linalg.norm(by_hand, axis=1, keepdims=True)
    np.testing.assert_allclose(prefixed.encode_queries(["头痛"]), by_hand, atol=1e-5)
    with pytest.raises(CareError, match="pooling cannot change a saved routed folder"):
        load_side(f"{tiny_care}?pooling=cls", "query")


def test_sharded_build_matches_the_document_encoder(tiny_care, corpus, tmp_path, document_vectors):
    output = tmp_path / "idx"
    assert build(_options(tiny_care, corpus, output), shard=(1, 3)) is None  # not all shards yet: no merge
    assert not (output / "manifest.json").exists()
    with pytest.raises(CareError, match="shard\\(s\\) 0/3, 2/3 are not finished"):
        build(_options(tiny_care, corpus, output), merge=True)
    build(_options(tiny_care, corpus, output), shard=(0, 3))
    manifest = build(_options(tiny_care, corpus, output), shard=(2, 3))  # last shard merges automatically
    assert manifest is not None and manifest.n_docs == len(SAMPLE_DOCS) and len(manifest.shards) == 3
    shard = np.load(output / "shards" / "shard-00001-of-00003.npy", mmap_mode="r")
    assert shard.dtype == np.float16 and shard.shape == (3, document_vectors.shape[1])
    assert np.allclose(shard, document_vectors[2:5], atol=2e-3)
    bundle = open_index_folder(output)
    scores, rows = bundle.index.search(document_vectors[:3], 1)
    assert list(rows[:, 0]) == [0, 1, 2]
    assert bundle.docstore.get([4])[4].id == SAMPLE_DOCS[4]["id"]
    saved = json.loads((output / "manifest.json").read_text())
    assert saved["corpus_sha256"] and saved["encoder_fingerprint"] and saved["dim"] == document_vectors.shape[1]


def test_crash_mid_shard_resumes_without_repeating_finished_chunks(tiny_care, corpus, tmp_path, monkeypatch, document_vectors):
    from care.index import build as build_module

    output = tmp_path / "idx"
    encoder = load_side(str(tiny_care), "document")
    seen: list[str] = []
    original = encoder.encode_documents

    def crashing(texts, **kw):
        if len(seen) >= 4:
            raise RuntimeError("killed")
        seen.extend(texts)
        return original(texts, **kw)

    monkeypatch.setattr(encoder, "encode_documents", crashing)
    monkeypatch.setattr(build_module, "_load_encoder", lambda options: encoder)
    with pytest.raises(RuntimeError, match="killed"):
        build(_options(tiny_care, corpus, output))
    progress = json.loads((output / "shards" / "shard-00000-of-00001.progress.json").read_text())
    assert progress["done"] == 4
    monkeypatch.setattr(encoder, "encode_documents", lambda texts, **kw: (seen.extend(texts), original(texts, **kw))[1])
    manifest = build(_options(tiny_care, corpus, output))
    assert len(seen) == len(SAMPLE_DOCS)  # each document encoded exactly once across the two runs
    assert manifest is not None
    merged = np.load(output / "shards" / "shard-00000-of-00001.npy")
    assert np.allclose(merged, document_vectors, atol=2e-3)


def test_finished_shards_are_skipped_without_loading_the_model(tiny_care, corpus, tmp_path, monkeypatch):
    from care.index import build as build_module

    output = tmp_path / "idx"
    build(_options(tiny_care, corpus, output, num_shards=2))

    def no_model(options):
        raise AssertionError("the model must not be loaded when every shard is finished")

    monkeypatch.setattr(build_module, "_load_encoder", no_model)
    manifest = build(_options(tiny_care, corpus, output, num_shards=2))
    assert manifest is not None and manifest.n_docs == len(SAMPLE_DOCS)


def test_rerun_with_another_corpus_or_shard_count_is_refused(tiny_care, corpus, tmp_path):
    output = tmp_path / "idx"
    build(_options(tiny_care, corpus, output), shard=(0, 2), merge=False)
    with pytest.raises(CareError, match="different num_shards"):
        build(_options(tiny_care, corpus, output), shard=(0, 3))
    other = write_corpus(tmp_path / "other.jsonl", SAMPLE_DOCS[:4])
    with pytest.raises(CareError, match="different corpus_sha256"):
        build(_options(tiny_care, other, output), shard=(1, 2))


def test_duplicate_ids_and_missing_text_are_named(tiny_care, tmp_path):
    dup = write_corpus(tmp_path / "dup.jsonl", [SAMPLE_DOCS[0], SAMPLE_DOCS[1], SAMPLE_DOCS[0]])
    with pytest.raises(DataFormatError, match="line 3.*duplicate id 'd1' \\(first seen on line 1\\)"):
        build(_options(tiny_care, dup, tmp_path / "a"))
    empty = write_corpus(tmp_path / "empty.jsonl", [{"id": "x", "text": ""}])
    with pytest.raises(DataFormatError, match="text"):
        build(_options(tiny_care, empty, tmp_path / "b"))


@pytest.mark.parametrize("index_type", ["hnsw", "ivf"])
def test_other_index_types_find_each_document_itself(tiny_care, corpus, tmp_path, document_vectors, index_type):
    config = IndexConfig(type=index_type, nlist=2, nprobe=2)
    build(_options(tiny_care, corpus, tmp_path / index_type, index=config))
    bundle = open_index_folder(tmp_path / index_type)
    assert bundle.manifest.index["type"] == index_type
    _, rows = bundle.index.search(document_vectors, 1)
    assert list(rows[:, 0]) == list(range(len(SAMPLE_DOCS)))


def test_cli_builds_an_index(tiny_care, corpus, tmp_path):
    from typer.testing import CliRunner

    from care.cli import app

    output = tmp_path / "cli-idx"
    args = ["index", "build", "--model", str(tiny_care), "--corpus", str(corpus), "--output", str(output), "--shard", "0/2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "merge when all are finished" in result.output
    result = CliRunner().invoke(app, args[:-1] + ["1/2"])
    assert result.exit_code == 0 and "index ready" in result.output
    assert open_index_folder(output).manifest.n_docs == len(SAMPLE_DOCS)


def _crash_at_the_final_rename(monkeypatch, shard_file: str, *, after: bool) -> None:
    """Make the rename that finishes ``shard_file`` the last thing the process does (KeyboardInterrupt)."""
    import os

    real = os.replace

    def replace(src, dst):
        if str(dst).endswith(shard_file):
            if after:
                real(src, dst)
            raise KeyboardInterrupt("killed at the final rename")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("after", [True, False], ids=["right-after-the-rename", "right-before-the-rename"])
def test_kill_at_a_shards_final_rename_neither_re_encodes_nor_leaves_temp_files(tiny_care, corpus, tmp_path, monkeypatch,
                                                                                after):
    from care.index import build as build_module

    output = tmp_path / "idx"
    encoder = load_side(str(tiny_care), "document")
    encoded: list[str] = []
    original = encoder.encode_documents
    monkeypatch.setattr(encoder, "encode_documents", lambda texts, **kw: (encoded.extend(texts), original(texts, **kw))[1])
    monkeypatch.setattr(build_module, "_load_encoder", lambda options: encoder)
    with monkeypatch.context() as crash:
        _crash_at_the_final_rename(crash, "shard-00000-of-00001.npy", after=after)
        with pytest.raises(KeyboardInterrupt):
            build(_options(tiny_care, corpus, output))
    assert len(encoded) == len(SAMPLE_DOCS)
    shards = output / "shards"
    (shards / ".shard-00000-of-00001.progress.json.k1ll3d.tmp").write_text("{", encoding="utf-8")  # as kill -9 leaves one
    manifest = build(_options(tiny_care, corpus, output))
    assert len(encoded) == len(SAMPLE_DOCS)  # nothing encoded again
    assert manifest is not None and manifest.n_docs == len(SAMPLE_DOCS)
    assert sorted(p.name for p in shards.iterdir()) == ["shard-00000-of-00001.json", "shard-00000-of-00001.npy"]
    assert not list(output.rglob("*.tmp"))


def test_a_finished_shard_file_without_its_record_is_not_encoded_again(tiny_care, corpus, tmp_path, monkeypatch):
    from care.index import build as build_module

    output = tmp_path / "idx"
    build(_options(tiny_care, corpus, output, num_shards=2))
    record = json.loads((output / "shards" / "shard-00001-of-00002.json").read_text())
    (output / "shards" / "shard-00001-of-00002.json").unlink()  # what a crash of the old order (rename, then record) left
    (output / "manifest.json").unlink()

    def no_model(options):
        raise AssertionError("a finished shard file is its own record: nothing to encode")

    monkeypatch.setattr(build_module, "_load_encoder", no_model)
    manifest = build(_options(tiny_care, corpus, output, num_shards=2))
    assert manifest is not None and manifest.n_docs == len(SAMPLE_DOCS)
    rebuilt = json.loads((output / "shards" / "shard-00001-of-00002.json").read_text())
    assert {k: rebuilt[k] for k in ("start", "end", "dim", "encoder_fingerprint")} == \
        {k: record[k] for k in ("start", "end", "dim", "encoder_fingerprint")}


def _bench_cache(tiny_care, corpus, root, *, dtype="float32"):
    """The embedding cache ``care bench`` leaves after scoring a retrieval task on ``corpus`` with the whole model."""
    from care.bench.encoding import DOCUMENT, encode_collection
    from care.data.retrieval import iter_documents
    from care.encoders.cache import EmbeddingCache
    from care.encoders.registry import load_model

    cache = EmbeddingCache(root, dtype=dtype)
    docs = list(iter_documents(corpus))
    vectors = encode_collection(load_model(str(tiny_care)), cache, role=DOCUMENT, ids=[d.id for d in docs],
                                texts=[d.full_text for d in docs], instruction=None, batch_size=4,
                                show_progress=False, desc="corpus")
    return np.array(vectors)


def _counting_encoder(tiny_care, monkeypatch):
    from care.index import build as build_module

    encoder = load_side(str(tiny_care), "document")
    encoded: list[str] = []
    original = encoder.encode_documents
    monkeypatch.setattr(encoder, "encode_documents", lambda texts, **kw: (encoded.extend(texts), original(texts, **kw))[1])
    monkeypatch.setattr(build_module, "_load_encoder", lambda options: encoder)
    return encoded


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vectors_care_bench_cached_for_this_corpus_are_copied_not_encoded(tiny_care, corpus, tmp_path, monkeypatch, dtype):
    cached = _bench_cache(tiny_care, corpus, tmp_path / "cache", dtype=dtype)
    encoded = _counting_encoder(tiny_care, monkeypatch)
    output = tmp_path / "idx"
    manifest = build(_options(tiny_care, corpus, output, num_shards=2, cache_dir=tmp_path / "cache"))
    assert encoded == []  # the model's document side read no text
    assert manifest is not None
    assert [s["copied_rows"] for s in manifest.shards] == [end - start for start, end in shard_ranges(len(SAMPLE_DOCS), 2)]
    shards = [np.load(output / "shards" / f"shard-0000{i}-of-00002.npy") for i in range(2)]
    np.testing.assert_array_equal(np.concatenate(shards), cached.astype(np.float16))
    _, rows = open_index_folder(output).index.search(cached.astype(np.float32), 1)
    assert list(rows[:, 0]) == list(range(len(SAMPLE_DOCS)))


def test_a_cache_of_another_corpus_or_model_is_not_used(tiny_care, corpus, tmp_path, monkeypatch):
    _bench_cache(tiny_care, corpus, tmp_path / "cache")
    other = tmp_path / "other.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    rows[-1]["text"] += "。"  # one document changed: the cache's vectors are not this corpus's
    other.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    encoded = _counting_encoder(tiny_care, monkeypatch)
    manifest = build(_options(tiny_care, other, tmp_path / "idx", cache_dir=tmp_path / "cache"))
    assert len(encoded) == len(SAMPLE_DOCS) and manifest.shards[0]["copied_rows"] == 0

    retrained = make_tiny_care_model(tmp_path / "retrained", SAMPLE_QUERIES)  # the same corpus, another model (vocabulary)
    monkeypatch.undo()
    encoded = _counting_encoder(retrained, monkeypatch)
    manifest = build(_options(retrained, corpus, tmp_path / "idx2", cache_dir=tmp_path / "cache"))
    assert len(encoded) == len(SAMPLE_DOCS) and manifest.shards[0]["copied_rows"] == 0


def test_cli_reads_the_cache_unless_told_not_to(tiny_care, corpus, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from care.cli import app

    _bench_cache(tiny_care, corpus, tmp_path / "cache")
    encoded = _counting_encoder(tiny_care, monkeypatch)
    base = ["index", "build", "--model", str(tiny_care), "--corpus", str(corpus)]
    result = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert encoded == [] and open_index_folder(tmp_path / "a").manifest.shards[0]["copied_rows"] == len(SAMPLE_DOCS)
    result = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "b"), "--cache-dir", str(tmp_path / "cache"),
                                      "--no-cache"])
    assert result.exit_code == 0, result.output
    assert len(encoded) == len(SAMPLE_DOCS) and open_index_folder(tmp_path / "b").manifest.shards[0]["copied_rows"] == 0
