"""Validation hold-out by answer group: no held-out answer is a training positive; the task folder scores."""

from __future__ import annotations

import json

import pytest

from care.data.splits import hold_out_by_positive, write_validation_task
from care.errors import CareError


def _rows():
    # answers a0..a9; answer a{i} has i % 3 + 1 queries
    return [{"query": f"q{i}-{j}", "pos": [f"a{i}"]} for i in range(10) for j in range(i % 3 + 1)]


def test_whole_answer_groups_are_held_out_deterministically():
    rows = _rows()
    kept, held = hold_out_by_positive(rows, 0.2, seed=3)
    assert len(kept) + len(held) == len(rows) and len(held) >= 0.2 * len(rows)
    assert not {r["pos"][0] for r in kept} & {r["pos"][0] for r in held}
    assert hold_out_by_positive(rows, 0.2, seed=3) == (kept, held)
    assert hold_out_by_positive(rows, 0.2, seed=4) != (kept, held)
    with pytest.raises(CareError, match="share"):
        hold_out_by_positive(rows, 1.5, seed=0)


def test_validation_task_folder_loads_and_names_missing_positives(tmp_path):
    from care.data.retrieval import load_retrieval_folder

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"a{i}"}) + "\n" for i in range(10)), encoding="utf-8")
    _, held = hold_out_by_positive(_rows(), 0.3, seed=0)
    data = load_retrieval_folder(write_validation_task(held, corpus, tmp_path / "val"))
    assert len(data.queries) == len(held)
    assert all(data.corpus[next(iter(data.qrels[q]))].text == r["pos"][0]
               for q, r in zip(sorted(data.queries), held))
    with pytest.raises(CareError, match="not in"):
        write_validation_task([{"query": "x", "pos": ["nowhere"]}], corpus, tmp_path / "bad")
