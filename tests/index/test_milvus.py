"""The Milvus backend against milvus-lite (the embedded edition of the same pymilvus client API)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason="the Milvus backend needs pymilvus: pip install 'care-retrieval[milvus]'")
pytest.importorskip("milvus_lite", reason="milvus-lite is not installed: pip install 'care-retrieval[milvus]'")

from care.errors import CareError, DimensionMismatchError  # noqa: E402
from care.index.milvus import MilvusIndex  # noqa: E402

DIM = 16


@pytest.fixture(autouse=True, scope="module")
def _stop_embedded_servers():
    """Milvus Lite serves each database from gRPC threads that outlive the client's ``close()``; stop them after
    this module so they do not run beside the rest of the suite (a full run once crashed later, with them alive)."""
    yield
    from milvus_lite import server_manager_instance

    server_manager_instance.release_all()


def _unit(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_milvus_lite_search_equals_exact_inner_product_and_reloads(tmp_path):
    docs, queries = _unit(200, 0), _unit(5, 1)
    index = MilvusIndex.create(str(tmp_path / "milvus.db"), "docs", DIM)
    index.add(docs[:120])
    index.add(docs[120:])  # ids continue from ntotal
    assert index.ntotal == 200
    scores, ids = index.search(queries, 5)
    exact = np.argsort(-(queries @ docs.T), axis=1)[:, :5]
    assert (ids == exact).all()
    assert np.allclose(scores, np.take_along_axis(queries @ docs.T, exact, axis=1), atol=1e-4)
    with pytest.raises(DimensionMismatchError):
        index.add(np.zeros((1, DIM + 1), dtype=np.float32))
    index.save(tmp_path / "index")
    index.close()
    again = MilvusIndex.load(tmp_path / "index")
    assert again.ntotal == 200 and (again.search(queries, 5)[1] == exact).all()
    again.close()


def test_missing_database_is_a_clear_error(tmp_path):
    index = MilvusIndex.create(str(tmp_path / "m.db"), "docs", DIM)
    index.add(_unit(3, 2))
    index.save(tmp_path / "index")
    index.close()
    shutil.rmtree(tmp_path / "m.db") if (tmp_path / "m.db").is_dir() else (tmp_path / "m.db").unlink()
    with pytest.raises(CareError, match="milvus-lite database .* is missing"):
        MilvusIndex.load(tmp_path / "index")


def test_index_build_with_the_milvus_backend(tmp_path):
    import torch

    from care.encoders.sides import load_side
    from care.index.build import BuildOptions, build
    from care.index.bundle import open_index_folder
    from care.testing.tiny_model import SAMPLE_DOCS, make_tiny_care_model, write_corpus

    torch.set_num_threads(1)
    model = make_tiny_care_model(tmp_path / "tiny")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    manifest = build(BuildOptions(model=str(model), corpus=corpus, output=tmp_path / "idx", backend="milvus", batch_size=4))
    assert manifest is not None and manifest.backend == "milvus"
    bundle = open_index_folder(tmp_path / "idx")
    vectors = load_side(str(model), "document").encode_documents([f"{d['title']} {d['text']}" for d in SAMPLE_DOCS])
    _, rows = bundle.index.search(vectors, 1)
    assert list(rows[:, 0]) == list(range(len(SAMPLE_DOCS)))
    bundle.index.close()


def test_a_milvus_backed_index_verifies_its_local_files_and_the_collections_row_count(tmp_path):
    import torch

    from care.index.build import BuildOptions, build
    from care.index.bundle import open_index_folder
    from care.index.integrity import IndexDamagedError
    from care.testing.tiny_model import make_tiny_care_model, write_corpus

    torch.set_num_threads(1)
    model = make_tiny_care_model(tmp_path / "tiny")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    folder = tmp_path / "idx"
    manifest = build(BuildOptions(model=str(model), corpus=corpus, output=folder, backend="milvus", batch_size=4))
    assert set(manifest.files) == {"plan.json", "docstore.sqlite", "index/milvus.json"}  # milvus.db is Milvus's own
    open_index_folder(folder).index.close()
    extra = MilvusIndex.load(folder / "index")
    extra.add(np.eye(2, manifest.dim, dtype=np.float32))
    extra.save(tmp_path / "elsewhere")  # flushes; the folder's milvus.json is left as the build wrote it
    extra.close()
    with pytest.raises(IndexDamagedError, match=rf"collection 'care' .* holds {manifest.n_docs + 2} rows but .* lists "
                                                rf"{manifest.n_docs} documents"):
        open_index_folder(folder)
    with pytest.raises(IndexDamagedError, match=r"milvus\.json is damaged"):
        (folder / "index" / "milvus.json").write_text("{}", encoding="utf-8")
        open_index_folder(folder)
