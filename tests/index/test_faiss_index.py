"""FAISS indexes: exactness of flat search, approximate types finding true neighbours, streaming
adds into IVF, save/load round trip, clear errors."""

import faiss
import numpy as np
import pytest

from care.errors import CareError, DimensionMismatchError
from care.index import FaissIndex, IndexConfig, SearchIndex, build_index, load_index

DIM = 16


def _unit(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_flat_is_exact_inner_product():
    docs, queries = _unit(200, 0), _unit(5, 1)
    index = build_index(IndexConfig(), DIM)
    assert isinstance(index, SearchIndex)
    for start in range(0, 200, 64):
        index.add(docs[start : start + 64])
    scores, ids = index.search(queries, 10)
    expected = np.argsort(-(queries @ docs.T), axis=1)[:, :10]
    assert np.array_equal(ids, expected)
    assert np.allclose(scores, np.take_along_axis(queries @ docs.T, expected, axis=1), atol=1e-5)
    assert index.ntotal == 200


@pytest.mark.parametrize("config", [
    IndexConfig(type="hnsw", hnsw_m=16, ef_search=64),
    IndexConfig(type="ivf", nlist=4, nprobe=4, train_size=100),
    IndexConfig(type="ivfpq", nlist=4, nprobe=4, pq_m=8, pq_nbits=4, train_size=300),
])
def test_approximate_indexes_find_true_neighbours(config):
    docs, queries = _unit(400, 2), _unit(20, 3)
    index = build_index(config, DIM)
    for start in range(0, 400, 50):  # streamed: IVF trains once train_size vectors arrived
        index.add(docs[start : start + 50])
    assert index.ntotal == 400
    # exact types must rank the true neighbour first; PQ is lossy, so ask for it in the top 10
    k = 10 if config.type == "ivfpq" else 1
    _, ids = index.search(queries, k)
    truth = np.argmax(queries @ docs.T, axis=1)
    hit_rate = float(np.mean([t in row for t, row in zip(truth, ids)]))
    assert hit_rate >= 0.9


def test_ivf_with_fewer_vectors_than_train_size_trains_at_search():
    docs = _unit(100, 4)
    index = build_index(IndexConfig(type="ivf", nlist=64, nprobe=64), DIM)
    index.add(docs)
    assert index.needs_training
    _, ids = index.search(docs[:3], 1)
    assert ids[:, 0].tolist() == [0, 1, 2] and not index.needs_training


def test_save_load_round_trip(tmp_path):
    docs, queries = _unit(300, 5), _unit(4, 6)
    for config in (IndexConfig(), IndexConfig(type="hnsw", ef_search=77), IndexConfig(type="ivf", nlist=4, nprobe=3)):
        index = build_index(config, DIM)
        index.add(docs)
        before = index.search(queries, 5)
        index.save(tmp_path / config.type)
        loaded = load_index(tmp_path / config.type)
        assert loaded.config == config and loaded.ntotal == 300
        after = loaded.search(queries, 5)
        assert np.array_equal(before[1], after[1]) and np.allclose(before[0], after[0])
        assert FaissIndex.load(tmp_path / config.type).ntotal == 300


def test_errors(tmp_path):
    index = build_index(IndexConfig(), DIM)
    with pytest.raises(CareError, match="empty index"):
        index.search(_unit(1, 0), 3)
    with pytest.raises(DimensionMismatchError, match="dimension 8 but the index has dimension 16"):
        index.add(np.zeros((2, 8), dtype=np.float32))
    with pytest.raises(CareError, match="unknown index type"):
        IndexConfig(type="annoy")
    with pytest.raises(CareError, match="not a saved index"):
        load_index(tmp_path)
    with pytest.raises(CareError, match="pq_m=5 must divide"):
        idx = build_index(IndexConfig(type="ivfpq", pq_m=5, nlist=1), DIM)
        idx.add(_unit(50, 0))
        idx.search(_unit(1, 0), 1)


def test_config_round_trip():
    config = IndexConfig(type="hnsw", ef_search=10)
    assert IndexConfig.from_dict(config.to_dict()) == config
    with pytest.raises(CareError, match="unknown field 'colour'"):
        IndexConfig.from_dict({"type": "flat", "colour": 1})


def test_k_larger_than_ntotal_is_capped():
    index = build_index(IndexConfig(), DIM)
    index.add(_unit(3, 0))
    scores, ids = index.search(_unit(2, 1), 10)
    assert ids.shape == (2, 3) and (ids >= 0).all()


@pytest.mark.parametrize("refine,nbits", [("flat", 4), ("sq8", 4), ("flat", 8)])
def test_refined_ivfpq_recovers_the_recall_pq_loses(refine, nbits, tmp_path):
    """Coarse PQ (8 sub-quantisers of 4 bits) misses true neighbours; re-ranking its candidates with
    exact (or 8-bit) vectors finds them, and the setting survives save / load."""
    docs, queries = _unit(600, 7), _unit(40, 8)
    truth = np.argsort(-(queries @ docs.T), axis=1)[:, :5]

    def recall(index):
        _, ids = index.search(queries, 5)
        return float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(ids, truth)]))

    base = dict(type="ivfpq", nlist=4, nprobe=4, pq_m=8 if nbits == 4 else 2, pq_nbits=nbits, train_size=600)
    plain, refined = build_index(IndexConfig(**base), DIM), build_index(IndexConfig(**base, refine=refine, refine_k_factor=10), DIM)
    for index in (plain, refined):
        index.add(docs)
    assert recall(plain) < 0.6 and recall(refined) >= 0.95
    refined.save(tmp_path)
    loaded = load_index(tmp_path)
    assert loaded.config.refine == refine and recall(loaded) == recall(refined)
    fast_scan = "FastScan" in type(faiss.downcast_index(faiss.extract_index_ivf(loaded._index))).__name__
    assert fast_scan == (nbits == 4)


def test_refine_is_only_for_ivfpq():
    with pytest.raises(CareError, match="use it with type=ivfpq"):
        IndexConfig(type="hnsw", refine="flat")
    with pytest.raises(CareError, match="unknown refine"):
        IndexConfig(type="ivfpq", refine="pq")


def test_config_from_command_line_strings():
    config = IndexConfig.from_options("ivfpq", {"pq_m": "192", "pq_nbits": "4", "refine": "flat", "nprobe": "96"})
    assert config == IndexConfig(type="ivfpq", pq_m=192, pq_nbits=4, refine="flat", nprobe=96)
    with pytest.raises(CareError, match="nprobe"):
        IndexConfig.from_options("ivf", {"nprobe": "many"})
    with pytest.raises(CareError, match="unknown option .probes."):
        IndexConfig.from_options("ivf", {"probes": "4"})


def test_native_is_the_faiss_object_once_there_is_one():
    ivf = build_index(IndexConfig(type="ivf", nlist=4, nprobe=2, train_size=1000), DIM)
    ivf.add(_unit(100, 9))  # buffered until train_size vectors, or the first search
    assert ivf.native is None
    ivf.search(_unit(1, 10), 1)
    assert faiss.extract_index_ivf(ivf.native).nprobe == 2 and ivf.native.ntotal == 100


@pytest.mark.parametrize("config,exact", [
    (IndexConfig(type="flat"), True),
    (IndexConfig(type="hnsw"), True),
    (IndexConfig(type="ivf", nlist=4), True),
    (IndexConfig(type="ivfpq", nlist=4, pq_m=4, refine="flat"), True),
    (IndexConfig(type="ivfpq", nlist=4, pq_m=4, refine="sq8"), False),
    (IndexConfig(type="ivfpq", nlist=4, pq_m=4), False),
])
def test_stored_vector_blocks_are_the_added_vectors_where_the_index_keeps_them(config, exact, tmp_path):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((300, 16)).astype(np.float32)
    index = build_index(config, 16)
    index.add(vectors)
    index.save(tmp_path)
    blocks = load_index(tmp_path).stored_vector_blocks(block_rows=64)
    if not exact:
        assert blocks is None
        return
    stored = np.concatenate(list(blocks))
    order = lambda m: m[np.lexsort(m.T[::-1])]  # noqa: E731 - IVF lists hold the rows grouped by list
    np.testing.assert_array_equal(order(stored), order(vectors))
