"""Training rows sampled into groups and batches: sampling per seed/epoch/index, collation, kind-grouped batches."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from care.data.errors import DataFormatError
from care.data.training import DOC_ALIGN, QUERY_ALIGN, TrainingExample, TrainingFile, load_training_file
from care.train.engine.data import KindGroupedBatchSampler, TrainingGroupDataset, build_groups, collate_groups
from tests.data.test_training import ROWS, write_rows


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
