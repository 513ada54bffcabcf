"""The embedding cache: hits, keys, interrupted encodes resuming, float16 storage."""

import numpy as np
import pytest

from care.encoders.cache import (
    MANIFEST_FILE,
    PARTIAL_FILE,
    PROGRESS_FILE,
    EmbeddingCache,
    check_embeddings,
    content_hash,
    default_cache_dir,
)
from care.errors import CareError

TEXTS = [f"文档{i} 内容" for i in range(10)]
IDS = [str(i) for i in range(10)]


class Counting:
    """Deterministic 4-d vectors from the text; counts encoded texts; can fail after n calls."""

    def __init__(self, fail_after_calls: int | None = None):
        self.encoded = 0
        self.calls = 0
        self.fail_after_calls = fail_after_calls

    def __call__(self, chunk):
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise KeyboardInterrupt("simulated crash")
        self.calls += 1
        self.encoded += len(chunk)
        return np.array([[len(t), sum(map(ord, t)) % 97, i, 1.0] for i, t in enumerate(chunk)], dtype=np.float32)


def test_second_run_encodes_nothing(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=3, grow_chunks=False)
    key = cache.key("fp", "document", None, IDS, TEXTS)
    enc = Counting()
    first = np.array(cache.get_or_encode(key, TEXTS, enc))
    assert enc.encoded == 10 and enc.calls == 4  # chunks of 3, 3, 3, 1
    enc2 = Counting()
    second = cache.get_or_encode(key, TEXTS, enc2)
    assert enc2.encoded == 0
    assert isinstance(second, np.memmap) and np.array_equal(first, second)
    assert (cache.entry_dir(key) / MANIFEST_FILE).is_file()


def test_interrupted_encode_resumes_from_last_chunk(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=3, grow_chunks=False)
    key = cache.key("fp", "document", None, IDS, TEXTS)
    crashing = Counting(fail_after_calls=2)
    with pytest.raises(KeyboardInterrupt):
        cache.get_or_encode(key, TEXTS, crashing)
    folder = cache.entry_dir(key)
    assert (folder / PARTIAL_FILE).is_file() and (folder / PROGRESS_FILE).is_file()
    assert not (folder / MANIFEST_FILE).exists() and cache.lookup(key) is None
    resumed = Counting()
    out = np.array(cache.get_or_encode(key, TEXTS, resumed))
    assert resumed.encoded == 4, "rows 0-5 were finished before the crash"
    # an uninterrupted run with the same chunking (the fake's 3rd column restarts per chunk)
    reference = np.array(EmbeddingCache(tmp_path / "ref", chunk_size=3, grow_chunks=False).get_or_encode(key, TEXTS, Counting()))
    assert np.array_equal(out, reference)
    assert not (folder / PARTIAL_FILE).exists() and not (folder / PROGRESS_FILE).exists()


def test_fast_encoders_get_growing_chunks(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=1)
    sizes = []

    def encode(chunk):
        sizes.append(len(chunk))
        return np.ones((len(chunk), 2), dtype=np.float32)

    key = cache.key("fp", "document", None, IDS, TEXTS)
    assert cache.get_or_encode(key, TEXTS, encode).shape == (10, 2)
    assert sizes == [1, 2, 4, 3]  # doubling while chunks are fast; the last one takes the rest


def test_key_depends_on_fingerprint_role_instruction_and_content(tmp_path):
    cache = EmbeddingCache(tmp_path)
    base = cache.key("fp", "query", "inst", IDS, TEXTS)
    assert base.digest != cache.key("fp2", "query", "inst", IDS, TEXTS).digest
    assert base.digest != cache.key("fp", "document", "inst", IDS, TEXTS).digest
    assert base.digest != cache.key("fp", "query", None, IDS, TEXTS).digest
    assert base.digest != cache.key("fp", "query", "inst", IDS[::-1], TEXTS[::-1]).digest
    assert content_hash(["a", "b"], ["xy", "z"]) != content_hash(["a", "b"], ["x", "yz"])


def test_float16_storage_and_store(tmp_path):
    cache = EmbeddingCache(tmp_path, dtype="float16")
    key = cache.key("fp", "document", None, IDS, TEXTS)
    vecs = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    stored = cache.store(key, vecs, name="pre")
    assert stored.dtype == np.float16 and np.allclose(stored, vecs, atol=1e-2)
    enc = Counting()
    assert cache.get_or_encode(key, TEXTS, enc).shape == (10, 8) and enc.encoded == 0


def test_checks(tmp_path):
    with pytest.raises(CareError, match="NaN or inf"):
        check_embeddings(np.array([[1.0, np.inf]]), 1, "x")
    with pytest.raises(CareError, match="expected dimension 3"):
        check_embeddings(np.zeros((1, 2)), 1, "x", dim=3)
    with pytest.raises(CareError, match="dtype"):
        EmbeddingCache(tmp_path, dtype="int8")


def test_default_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CARE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("CARE_CACHE_DIR")
    assert default_cache_dir().parts[-3:] == (".cache", "care", "embeddings")


class ByText:
    """Vectors that depend on the text alone (as a real encoder's); records every text it encodes."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, chunk):
        self.seen += list(chunk)
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in chunk], dtype=np.float32)


def test_a_grown_text_set_encodes_only_its_new_texts(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, grow_chunks=False)
    first = ByText()
    old = np.array(cache.get_or_encode(cache.key("fp", "document", None, IDS[:6], TEXTS[:6]), TEXTS[:6], first))
    grown_texts = ["新的文本", *TEXTS[::-1], TEXTS[0]]  # shuffled, one new text, one text twice
    grown_ids = [f"g{i}" for i in range(len(grown_texts))]  # ids play no part: a vector is the text's
    second = ByText()
    key = cache.key("fp", "document", None, grown_ids, grown_texts)
    grown = np.array(cache.get_or_encode(key, grown_texts, second))
    assert sorted(second.seen) == sorted(["新的文本", *TEXTS[6:]])
    for row, text in enumerate(grown_texts):
        expected = old[TEXTS.index(text)] if text in TEXTS[:6] else ByText()([text])[0]
        assert np.array_equal(grown[row], expected), text
    assert np.array_equal(np.array(cache.get_or_encode(key, grown_texts, ByText())), grown)


@pytest.mark.parametrize("other", [("fp2", "document", None, "float32"), ("fp", "query", None, "float32"),
                                   ("fp", "document", "inst", "float32"), ("fp", "document", None, "float16")])
def test_rows_are_copied_only_from_the_same_encoder_role_instruction_and_dtype(tmp_path, other):
    fingerprint, role, instruction, dtype = other
    EmbeddingCache(tmp_path, dtype=dtype).get_or_encode(
        EmbeddingCache(tmp_path).key(fingerprint, role, instruction, IDS, TEXTS), TEXTS, ByText())
    encoder = ByText()
    cache = EmbeddingCache(tmp_path)
    cache.get_or_encode(cache.key("fp", "document", None, IDS[:3], TEXTS[:3]), TEXTS[:3], encoder)
    assert encoder.seen == TEXTS[:3]


def test_an_interrupted_encode_of_a_grown_set_resumes_with_copied_rows(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=2, grow_chunks=False)
    cache.get_or_encode(cache.key("fp", "document", None, IDS[:4], TEXTS[:4]), TEXTS[:4], ByText())
    key = cache.key("fp", "document", None, IDS, TEXTS)
    calls = []

    def crashing(chunk):
        if calls:
            raise KeyboardInterrupt("simulated crash")
        calls.append(list(chunk))
        return ByText()(chunk)

    with pytest.raises(KeyboardInterrupt):
        cache.get_or_encode(key, TEXTS, crashing)
    assert calls == [TEXTS[4:6]], "rows 0-3 were copied, rows 4-5 encoded before the crash"
    resumed = ByText()
    out = np.array(cache.get_or_encode(key, TEXTS, resumed))
    assert resumed.seen == TEXTS[6:]
    assert np.array_equal(out, ByText()(TEXTS))
