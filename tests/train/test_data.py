"""Training-data format: validation naming file/line/field, false-negative dropping, sampling, batching."""

from __future__ import annotations

import json
import logging
import pickle
import random
from pathlib import Path

import pytest

from care.data.errors import DataFormatError
from care.train.data import (
    DOC_ALIGN,
    QUERY_ALIGN,
    RETRIEVAL,
    KindGroupedBatchSampler,
    TrainingExample,
    TrainingFile,
    TrainingGroupDataset,
    build_groups,
    collate_groups,
    load_training_file,
    write_training_file,
)

ROWS = [
    {"query": "头痛怎么办", "pos": ["多休息，必要时服用止痛药"], "neg": ["胃痛可以吃奥美拉唑", "感冒多喝水"]},
    {"query": "高血压吃什么药", "pos": ["常用氨氯地平", "可用缬沙坦"], "neg": ["常用氨氯地平", "糖尿病用二甲双胍"],
     "prompt": "Given a medical question, retrieve answers", "type": "normal"},
    {"query": "发烧", "pos": ["发烧"], "neg": ["发冷"], "type": "query_align"},
    {"query": "咳嗽有痰", "pos": ["咳嗽有痰"], "neg": ["咳嗽无痰"], "type": "doc_align",
     "pos_scores": [0.9], "neg_scores": [0.2]},
]


def write_rows(path: Path, rows: list, raw_lines: list[str] | None = None) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows] + (raw_lines or [])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_valid_file_and_drop_false_negative(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_rows(tmp_path / "train.jsonl", ROWS)
    with caplog.at_level(logging.WARNING):
        rows = load_training_file(path)
    assert len(rows) == 4
    assert rows[1].neg == ("糖尿病用二甲双胍",)  # "常用氨氯地平" is also a positive -> dropped
    assert "dropped 1 negative" in caplog.text and "lines 2" in caplog.text
    assert rows[1].prompt.startswith("Given") and rows[1].kind == RETRIEVAL
    assert [r.kind for r in rows] == [RETRIEVAL, RETRIEVAL, QUERY_ALIGN, DOC_ALIGN]
    assert rows[3].pos_scores == (0.9,) and rows[3].neg_scores == (0.2,)
    assert (rows[0].source, rows[0].line) == (str(path), 1)


@pytest.mark.parametrize(("bad", "field", "problem"), [
    ({"pos": ["a"], "neg": []}, "query", "missing field"),
    ({"query": "q", "pos": [], "neg": []}, "pos", "empty list"),
    ({"query": "q", "neg": ["n"]}, "pos", "missing field"),
    ({"query": "q", "pos": ["a", 3]}, "pos", "item 1"),
    ({"query": "q", "pos": ["a"], "neg": [""]}, "neg", "item 0"),
    ({"query": 5, "pos": ["a"]}, "query", "expected a string"),
    ({"query": "q", "pos": ["a"], "prompt": 1}, "prompt", "expected a string"),
    ({"query": "q", "pos": ["a"], "neg": ["b"], "neg_scores": [1, 2]}, "neg_scores", "2 scores for 1"),
])
def test_bad_rows_name_file_line_and_field(tmp_path: Path, bad: dict, field: str, problem: str) -> None:
    path = write_rows(tmp_path / "bad.jsonl", ROWS[:2] + [bad])
    for loader in (load_training_file, TrainingFile):
        with pytest.raises(DataFormatError) as info:
            loader(path)
        err = info.value
        assert (err.path, err.line, err.field) == (path, 3, field)
        assert problem in str(err) and "bad.jsonl, line 3" in str(err)


def test_malformed_json_and_empty_file(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "t.jsonl", ROWS[:1], raw_lines=["{not json"])
    for loader in (load_training_file, TrainingFile):
        with pytest.raises(DataFormatError, match="line 2.*malformed JSON"):
            loader(path)
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no training examples"):
        TrainingFile(tmp_path / "empty.jsonl")


def test_training_file_random_access_matches_loader(tmp_path: Path) -> None:
    # a BOM, a CRLF line and a blank line must not shift the offsets
    text = "\ufeff" + json.dumps(ROWS[0], ensure_ascii=False) + "\r\n\n" + "\n".join(
        json.dumps(r, ensure_ascii=False) for r in ROWS[1:]) + "\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(text.encode("utf-8"))
    eager = load_training_file(path)
    lazy = TrainingFile(path)
    assert len(lazy) == 4 and [lazy[i] for i in range(4)] == eager and lazy[-1] == eager[-1]
    assert [lazy.line_of(i) for i in range(4)] == [1, 3, 4, 5]
    assert lazy.kinds == [RETRIEVAL, RETRIEVAL, QUERY_ALIGN, DOC_ALIGN]
    assert lazy.negative_counts == [2, 1, 1, 1]
    assert pickle.loads(pickle.dumps(lazy))[2] == eager[2]  # DataLoader workers
    assert len(TrainingFile(path, max_examples=2)) == 2
    lazy.close()


def test_round_trip_write(tmp_path: Path) -> None:
    rows = load_training_file(write_rows(tmp_path / "a.jsonl", ROWS))
    write_training_file(tmp_path / "b.jsonl", rows)
    again = load_training_file(tmp_path / "b.jsonl")
    assert [r.to_json() for r in again] == [r.to_json() for r in rows]


def test_build_groups_without_and_with_replacement() -> None:
    ex = TrainingExample("q", ("p1", "p2"), tuple(f"n{i}" for i in range(10)))
    g = build_groups(ex, 7, random.Random(0))
    assert g.positive in ex.pos and len(g.negatives) == 7 and len(set(g.negatives)) == 7
    few = TrainingExample("q", ("p",), ("a", "b", "c"))
    g = build_groups(few, 7, random.Random(0))
    # list repeated ceil(7/3)=3 times then sampled: every negative appears 2 or 3 times
    counts = sorted(g.negatives.count(n) for n in "abc")
    assert len(g.negatives) == 7 and counts in ([2, 2, 3],) and sum(counts) == 7
    assert build_groups(few, 0, random.Random(0)).negatives == ()


def test_sampling_is_deterministic_per_seed_epoch_index(tmp_path: Path) -> None:
    rows = [TrainingExample(f"q{i}", ("p",), tuple(f"n{i}_{j}" for j in range(20))) for i in range(5)]
    a, b = TrainingGroupDataset(rows, 3, seed=1), TrainingGroupDataset(rows, 3, seed=1)
    assert [a[i] for i in range(5)] == [b[i] for i in range(5)]
    assert [a[i] for i in reversed(range(5))] == [b[i] for i in reversed(range(5))]  # order independent
    first = [a[i].negatives for i in range(5)]
    a.set_epoch(1)
    assert [a[i].negatives for i in range(5)] != first
    assert [TrainingGroupDataset(rows, 3, seed=2)[i].negatives for i in range(5)] != first


def test_missing_negatives_named_at_dataset_construction(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "t.jsonl", [ROWS[0], {"query": "q", "pos": ["p"]}])
    with pytest.raises(DataFormatError, match=r"t\.jsonl, line 2, field 'neg'.*n_negatives=7"):
        TrainingGroupDataset(TrainingFile(path), 7)
    with pytest.raises(DataFormatError, match="line 2"):
        TrainingGroupDataset(load_training_file(path), 1)
    assert len(TrainingGroupDataset(TrainingFile(path), 0)) == 2  # in-batch negatives only is fine


def test_collate_flattens_negatives_and_keeps_prompts_and_scores() -> None:
    rows = [TrainingExample("q1", ("p1",), ("a", "b"), prompt="inst", pos_scores=(1.0,), neg_scores=(0.1, 0.2)),
            TrainingExample("q2", ("p2",), ("c", "d"), type="doc_align", pos_scores=(0.9,), neg_scores=(0.3, 0.4))]
    ds = TrainingGroupDataset(rows, 2, seed=0)
    batch = collate_groups([ds[0], ds[1]])
    assert batch.queries == ["q1", "q2"] and batch.positives == ["p1", "p2"] and batch.n_negatives == 2
    assert sorted(batch.negatives[:2]) == ["a", "b"] and sorted(batch.negatives[2:]) == ["c", "d"]
    assert batch.prompts == ["inst", None] and batch.types == [None, "doc_align"]
    score = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}
    assert batch.teacher_scores == [[1.0] + [score[n] for n in batch.negatives[:2]],
                                    [0.9] + [score[n] for n in batch.negatives[2:]]]
    with pytest.raises(ValueError, match="same number of negatives"):
        collate_groups([ds[0], build_groups(rows[1], 1, random.Random(0))])


def test_kind_grouped_batches_single_and_multi_rank() -> None:
    kinds = [QUERY_ALIGN] * 9 + [DOC_ALIGN] * 5
    sampler = KindGroupedBatchSampler(kinds, 4, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 3 + 2
    assert sorted(i for b in batches for i in b) == list(range(14))
    assert all(len({kinds[i] for i in b}) == 1 for b in batches)
    assert batches == list(KindGroupedBatchSampler(kinds, 4, seed=3))
    sampler.set_epoch(1)
    assert list(sampler) != batches

    ranks = [list(KindGroupedBatchSampler(kinds, 2, seed=3, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 2 + 1  # global batches of 4: 9 -> 2, 5 -> 1 (rest dropped)
    for b0, b1 in zip(*ranks):
        assert len(b0) == len(b1) == 2 and not set(b0) & set(b1)
        assert kinds[b0[0]] == kinds[b1[0]]  # all ranks on the same kind at each step
