"""Integrity of an index folder (care.index.integrity, checked by care.index.bundle.open_index_folder): the build
records every file's size and sha256; damage to any of them — flipped bytes or truncation — is refused at open."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from care.encoders.fingerprint import file_sha256
from care.errors import CareError
from care.index.build import BuildOptions, build
from care.index.bundle import open_index_folder
from care.index.config import IndexConfig
from care.index.integrity import VERIFY_MODES, IndexDamagedError, verify_files
from care.index.manifest import MANIFEST_FILE, IndexManifest

#: Every file the merge leaves in a FAISS index folder besides the manifest (and the shards, which have records).
SERVED_FILES = {"plan.json", "docstore.sqlite", "index/index.faiss", "index/index.json"}
#: Bytes flipped in the middle of a file (the issue flipped 256 in the store, 64 in the vectors).
FLIPPED_BYTES = 64


@pytest.fixture(scope="module")
def built(tiny_care, corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("built") / "idx"
    build(BuildOptions(model=str(tiny_care), corpus=corpus, output=output, batch_size=4, chunk_size=4))
    return output


def _copy(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    return copy


def flip_middle(path: Path, n: int = FLIPPED_BYTES) -> None:
    """Invert ``n`` bytes around the middle of ``path`` (its size unchanged)."""
    data = bytearray(path.read_bytes())
    start = max(0, len(data) // 2 - n // 2)
    for i in range(start, min(len(data), start + n)):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    """Cut ``path`` to half its size."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_the_build_records_every_file_it_leaves_with_its_size_and_sha256(built):
    manifest = IndexManifest.load(built)
    assert set(manifest.files) == SERVED_FILES
    for name, entry in manifest.files.items():
        assert entry == {"sha256": file_sha256(built / name), "bytes": (built / name).stat().st_size}
    (shard,) = manifest.shards
    npy = next((built / "shards").glob("*.npy"))
    assert shard["sha256"] == file_sha256(npy) and shard["file_bytes"] == npy.stat().st_size
    low, high = manifest.norm_range
    assert 0.99 < low <= high < 1.01  # normalised vectors stored as float16


@pytest.mark.parametrize("damage", [flip_middle, truncate], ids=["flipped", "truncated"])
@pytest.mark.parametrize("name", sorted(SERVED_FILES))
def test_damage_to_any_file_is_refused_at_open_naming_it(built, tmp_path, name, damage):
    folder = _copy(built, tmp_path)
    damage(folder / name)
    with pytest.raises(IndexDamagedError, match=rf"{name} is damaged \(corrupt or truncated\).*care index build --merge"):
        open_index_folder(folder)  # default: full
    if damage is truncate:
        with pytest.raises(IndexDamagedError, match=rf"{name} is damaged .* bytes, but manifest.json records"):
            open_index_folder(folder, verify="quick")


def test_the_message_names_the_recorded_and_the_found_checksum(built, tmp_path):
    folder = _copy(built, tmp_path)
    recorded = IndexManifest.load(folder).files["docstore.sqlite"]["sha256"]
    flip_middle(folder / "docstore.sqlite", 256)
    with pytest.raises(IndexDamagedError) as caught:
        open_index_folder(folder)
    assert f"sha256 {file_sha256(folder / 'docstore.sqlite')}, but manifest.json records {recorded}" in str(caught.value)


def test_quick_finds_flipped_vector_bytes_by_their_norms_without_hashing(built, tmp_path):
    folder = _copy(built, tmp_path)
    index_file = folder / "index" / "index.faiss"
    n_docs, dim = IndexManifest.load(folder).n_docs, IndexManifest.load(folder).dim
    vectors_start = index_file.stat().st_size - n_docs * dim * 4  # a flat index ends with its float32 vectors
    data = bytearray(index_file.read_bytes())
    for i in range(vectors_start + 100, vectors_start + 100 + FLIPPED_BYTES):
        data[i] ^= 0xFF
    index_file.write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError, match=r"index is damaged: a stored vector has norm .* outside the range"):
        open_index_folder(folder, verify="quick")
    assert open_index_folder(folder, verify="off").index.ntotal == n_docs  # off: the operator's choice, nothing checked


def test_quick_runs_sqlite_quick_check_on_the_document_store(built, tmp_path):
    folder = _copy(built, tmp_path)
    store = folder / "docstore.sqlite"
    data = bytearray(store.read_bytes())
    page = 4096  # the docs table's first page is the store's second page
    for i in range(page + 8, page + 8 + FLIPPED_BYTES):  # its cell pointers
        data[i] ^= 0xFF
    store.write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError, match=r"docstore.sqlite is damaged: SQLite's quick_check reports"):
        open_index_folder(folder, verify="quick")


def test_an_intact_folder_opens_at_every_level_and_a_bad_level_is_refused(built):
    for mode in VERIFY_MODES:
        assert open_index_folder(built, verify=mode).index.ntotal == IndexManifest.load(built).n_docs
    with pytest.raises(CareError, match="--verify 'fast': choose one of full, quick, off"):
        open_index_folder(built, verify="fast")


def test_a_manifest_from_before_checksums_opens_with_a_warning_and_the_content_checks(built, tmp_path, caplog):
    folder = _copy(built, tmp_path)
    data = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    for key in ("files", "norm_range"):
        data.pop(key)
    IndexManifest.from_dict({**data, "format_version": 1}).save(folder)
    with caplog.at_level(logging.WARNING, logger="care.index.bundle"):
        open_index_folder(folder)
    assert "records no file checksums (format version 1" in caplog.text and "care index build --merge" in caplog.text
    index_file = folder / "index" / "index.faiss"
    data_bytes = bytearray(index_file.read_bytes())
    data_bytes[-4:] = np.float32(np.nan).tobytes()  # the last vector's last value
    index_file.write_bytes(bytes(data_bytes))
    with pytest.raises(IndexDamagedError, match="norm nan"):
        open_index_folder(folder)


def test_a_malformed_files_entry_is_named(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(IndexDamagedError, match=r"files\['a'\]: expected"):
        verify_files(tmp_path, {"a": {"sha256": 3}}, "full")


def test_a_damaged_shard_is_refused_by_the_merge_naming_the_command_that_encodes_it_again(built, tmp_path):
    folder = _copy(built, tmp_path)
    flip_middle(next((folder / "shards").glob("*.npy")))
    with pytest.raises(IndexDamagedError, match=r"shard-00000-of-00001.npy is damaged .*care index build --shard 0/1"):
        build(BuildOptions(model="unused", corpus=Path("unused"), output=folder), merge=True)


@pytest.mark.parametrize("index_type", ["hnsw", "ivf"])
def test_other_index_types_are_checked_too(tiny_care, corpus, tmp_path, index_type):
    output = tmp_path / "idx"
    config = IndexConfig(type=index_type, nlist=2)
    build(BuildOptions(model=str(tiny_care), corpus=corpus, output=output, batch_size=4, chunk_size=4, index=config))
    assert set(IndexManifest.load(output).files) == SERVED_FILES
    open_index_folder(output)
    flip_middle(output / "index" / "index.faiss")
    with pytest.raises(IndexDamagedError, match="index.faiss is damaged"):
        open_index_folder(output)


def test_a_manifest_altered_after_it_was_written_is_refused(built, tmp_path):
    folder = _copy(built, tmp_path)
    text = (folder / MANIFEST_FILE).read_text(encoding="utf-8")
    assert '"instruction": null' in text and '"content_digest": "' in text
    (folder / MANIFEST_FILE).write_text(text.replace('"instruction": null', '"instruction": "x"'), encoding="utf-8")
    with pytest.raises(IndexDamagedError, match=r"manifest.json is damaged: its content does not match"):
        open_index_folder(folder, verify="off")  # always checked: it costs nothing
    flip_middle(folder / MANIFEST_FILE)
    with pytest.raises(CareError, match=r"manifest.json"):
        open_index_folder(folder)
