"""Stage I alignment data: text == pos[0], negatives are similar other texts and never near-duplicates."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from care.bench.locations import DEV_SET_ENV, dev_set_or_none
from care.data.training import DOC_ALIGN, QUERY_ALIGN, load_training_file
from care.train.recipes.alignment_data import (
    DenseNegativeMiner,
    NearDuplicateFilter,
    alignment_from_training_file,
    build_alignment_data,
    char_overlap,
)

from ...hostile_text import HOSTILE_TEXTS

#: The dev set ($CARE_DEV_SET), or None: the test that reads it is skipped then.
DEV = dev_set_or_none()

QUERIES = ["头痛吃什么药", "头痛吃什么药？", "胃痛吃什么药", "高血压饮食注意什么", "糖尿病饮食注意什么"]
DOCS = ["头痛可以服用布洛芬缓解疼痛", "胃痛可以服用奥美拉唑", "高血压患者应低盐饮食", "糖尿病患者应控制糖分摄入"]


def check_rows(rows: list[dict], n: int) -> None:
    for row in rows:
        assert row["pos"] == [row["query"]]
        assert len(row["neg"]) == n
        for neg in row["neg"]:
            assert neg != row["query"]
            assert not NearDuplicateFilter()(row["query"], neg)


def test_near_duplicate_filter() -> None:
    dup = NearDuplicateFilter(max_char_overlap=0.8)
    assert dup("头痛吃什么药", "头痛吃什么药？")  # identical after dropping punctuation
    assert dup("头痛 吃什么药", "ＡＢ头痛吃什么药".replace("ＡＢ", ""))
    assert not dup("头痛吃什么药", "胃痛吃什么药")
    # bigrams {头痛, 痛吃, 吃什, 什么, 么药} vs {胃痛, 痛吃, 吃什, 什么, 么药}: 4 shared / 6 total
    assert char_overlap("头痛吃什么药", "胃痛吃什么药") == pytest.approx(4 / 6)


def test_bm25_alignment_rows() -> None:
    rows = list(build_alignment_data(QUERIES, DOCS, n_negatives=1, seed=0))
    q_rows = [r for r in rows if r["type"] == QUERY_ALIGN]
    d_rows = [r for r in rows if r["type"] == DOC_ALIGN]
    assert len(q_rows) == 5 and len(d_rows) == 4
    check_rows(rows, 1)
    by_query = {r["query"]: r["neg"][0] for r in q_rows}
    # the most similar other query that is not "头痛吃什么药？" (a near-duplicate)
    assert by_query["头痛吃什么药"] == "胃痛吃什么药"
    assert by_query["高血压饮食注意什么"] == "糖尿病饮食注意什么"
    assert {r["query"] for r in d_rows} == set(DOCS)


def test_random_top_up_is_seeded_and_avoids_duplicates() -> None:
    texts = ["甲", "乙", "丙", "丁"]  # no shared words: BM25 finds nothing
    a = list(build_alignment_data(texts, [], n_negatives=2, seed=7))
    b = list(build_alignment_data(texts, [], n_negatives=2, seed=7))
    assert a == b and len(a) == 4
    check_rows(a, 2)
    assert all(len(set(r["neg"])) == 2 for r in a)


class FakeEncoder:
    """Deterministic vectors keyed by text; records which role was asked."""

    name = "fake"
    fingerprint = "fake"
    dim = 2

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors, self.calls = vectors, []

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        v = np.array([self.vectors[t] for t in texts], dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def encode_queries(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.calls.append("query")
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.calls.append("document")
        return self._encode(texts)


def test_dense_miner_skips_too_similar_and_uses_roles() -> None:
    enc = FakeEncoder({"感冒发烧": [1, 0], "感冒头痛": [1, 0.01], "流感高热": [1, 0.3],
                       "骨折": [0, 1], "手术": [0.3, 1]})
    miner = DenseNegativeMiner(enc, max_cosine=0.99)
    texts = ["感冒发烧", "感冒头痛", "流感高热", "骨折"]
    neg = miner.mine(texts, 1, role="query")
    # cos(感冒发烧, 感冒头痛) ≈ 0.99995 >= 0.99: skipped as a near-duplicate; next is 流感高热 (cos ≈ 0.958)
    assert neg[0] == [2]
    assert neg[3] == [2]  # for 骨折 the most similar is 流感高热 (cos ≈ 0.287)
    # for 骨折 among documents: 手术 (cos ≈ 0.958) beats 流感高热 (cos ≈ 0.287)
    rows = list(build_alignment_data([], ["骨折", "手术", "流感高热"], negative_miner=miner))
    assert enc.calls == ["query", "document"]
    assert rows[0] == {"query": "骨折", "pos": ["骨折"], "neg": ["手术"], "type": DOC_ALIGN}


def test_alignment_from_training_file(tmp_path: Path) -> None:
    train = tmp_path / "train.jsonl"
    lines = [{"query": q, "pos": [d], "neg": []} for q, d in zip(QUERIES[::2], DOCS)]
    lines.append({"query": "x", "pos": ["x"], "neg": ["y"], "type": "query_align"})  # ignored
    train.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in lines) + "\n", encoding="utf-8")
    out = tmp_path / "align" / "stage1.jsonl"
    n = alignment_from_training_file(train, out, n_negatives=1)
    rows = load_training_file(out)
    assert n == len(rows) == 3 + 3
    assert all(r.pos == (r.query,) and r.query not in r.neg for r in rows)
    assert [r.type for r in rows] == [QUERY_ALIGN] * 3 + [DOC_ALIGN] * 3


def test_failure_leaves_no_output(tmp_path: Path) -> None:
    class Broken:
        def mine(self, texts: Sequence[str], n: int, *, role: str) -> list[list[int]]:
            raise RuntimeError("scorer crashed")

    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"query": "q", "pos": ["p"]}) + "\n", encoding="utf-8")
    with pytest.raises(RuntimeError):
        alignment_from_training_file(train, tmp_path / "out.jsonl", negative_miner=Broken())
    assert list(tmp_path.iterdir()) == [train]


@pytest.mark.devdata
@pytest.mark.skipif(DEV is None or not (DEV / "train.jsonl").is_file(), reason=f"dev set absent (${DEV_SET_ENV})")
def test_dev_queries_bm25() -> None:
    queries = []
    with (DEV / "train.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            queries.append(json.loads(line)["query"])
            if len(queries) == 300:
                break
    rows = list(build_alignment_data(queries, [], n_negatives=2, seed=0))
    assert len(rows) == len(set(q.strip() for q in queries))
    check_rows(rows, 2)


def test_document_sentences_split_filter_dedupe_and_limit() -> None:
    from care.train.recipes.alignment_data import document_sentences

    docs = ["你好。高血压患者应该少吃盐！每天坚持运动半小时？", "高血压患者应该少吃盐；糖尿病要控制饮食\n" + "很" * 70 + "。"]
    got = document_sentences(docs)
    assert sorted(got) == sorted(["高血压患者应该少吃盐", "每天坚持运动半小时", "糖尿病要控制饮食"])  # "你好" too short, 70 chars too long
    assert document_sentences(docs, seed=3) == document_sentences(docs, seed=3)
    assert len(document_sentences(docs, limit=2)) == 2


def test_stopword_and_symbol_only_texts_mine_without_crashing() -> None:
    """Issue 40: a corpus sentence of stopwords only (是怎么个...) used to crash BM25 (empty query)."""
    queries = [*QUERIES, "是怎么个...", "是什么", "！！！", "😀"]
    rows = list(build_alignment_data(queries, [*DOCS, "是怎么个..."], n_negatives=1, seed=0))
    assert len(rows) == len(queries) + len(DOCS) + 1
    check_rows(rows, 1)
    by_query = {r["query"]: r["neg"][0] for r in rows if r["type"] == QUERY_ALIGN}
    assert by_query["是什么"] == "是怎么个..."  # both keep their stopwords; they share 是


def test_every_hostile_text_gets_a_row_except_one_that_shows_nothing() -> None:
    """Unlabelled questions arrive as users typed them: each text that shows something is aligned once (emoji,
    Latin, traditional characters, a 10,000-character question); a zero-width-only text has nothing to align."""
    rows = list(build_alignment_data([*QUERIES, *HOSTILE_TEXTS, " 高血壓 ", "\u200b\u200b"], [], seed=0))
    assert [r["query"] for r in rows] == [*QUERIES, *(t for t in HOSTILE_TEXTS if t != "\u200b")]
    check_rows(rows, 1)


def test_alignment_without_document_rows(tmp_path):
    """``include_documents=False`` (care run's ``alignment_documents: false``): query-side rows only."""
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"query": q, "pos": [p]}, ensure_ascii=False) + "\n" for q, p in
                             [("胃痛怎么办", "胃痛要休息"), ("头痛怎么办", "头痛多喝水"), ("失眠怎么办", "失眠少看手机")]),
                     encoding="utf-8")
    both = alignment_from_training_file(train, tmp_path / "both.jsonl", extra_queries=["咳嗽怎么办"])
    only = alignment_from_training_file(train, tmp_path / "queries.jsonl", extra_queries=["咳嗽怎么办"], include_documents=False)
    kinds = [json.loads(line)["type"] for line in (tmp_path / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert (both, only) == (7, 4) and set(kinds) == {"query_align"}
