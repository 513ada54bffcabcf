"""The frozen teacher's vectors: computed once per text through the cache, looked up by text."""

import numpy as np
import pytest

from care.errors import CareError
from care.train.engine.teacher import TeacherEmbeddings


class CountingTeacher:
    """A frozen encoder whose vector of a text is fixed (seeded by its characters); records what it encodes."""

    name = "counting-teacher"
    fingerprint = "counting-teacher-v1"

    def __init__(self):
        self.encoded: list[str] = []

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        self.encoded += list(texts)
        vecs = np.stack([np.random.default_rng(sum(map(ord, t))).standard_normal(8) for t in texts])
        return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)


QUERIES = ["头痛怎么办", "高血压能吃党参吗", "糖尿病的症状", "感冒发烧吃什么药"]


def test_grown_alignment_texts_encode_only_the_new_ones(tmp_path):
    first = CountingTeacher()
    before = TeacherEmbeddings.compute(first, QUERIES, tmp_path)
    assert sorted(first.encoded) == sorted(QUERIES)
    grown = [*QUERIES, "宝宝十个月没长牙怎么办", "孩子左下腹部疼", QUERIES[0]]
    second = CountingTeacher()
    after = TeacherEmbeddings.compute(second, grown, tmp_path)
    assert sorted(second.encoded) == ["孩子左下腹部疼", "宝宝十个月没长牙怎么办"]
    assert len(after) == 6
    np.testing.assert_array_equal(after.lookup(QUERIES).numpy(), before.lookup(QUERIES).numpy())
    np.testing.assert_allclose(after.lookup(["孩子左下腹部疼"]).numpy(),
                               CountingTeacher().encode_documents(["孩子左下腹部疼"]), rtol=1e-6)
    third = CountingTeacher()
    TeacherEmbeddings.compute(third, grown, tmp_path)
    assert third.encoded == []


def test_a_text_never_embedded_is_refused_by_name(tmp_path):
    teacher = TeacherEmbeddings.compute(CountingTeacher(), QUERIES, tmp_path)
    with pytest.raises(CareError, match="not in the teacher cache"):
        teacher.lookup(["没有见过的问题"])
