"""Pooling's saved runs: reused on a restart with the same inputs, never across different ones."""

from __future__ import annotations

import json
import os

from care.curate.candidate_pool import load_or_run

from .conftest import CharEncoder


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


class CountingEncoder(CharEncoder):
    """CharEncoder that counts its document encodings (one per retrieval run)."""

    def __init__(self) -> None:
        self.runs = 0

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        self.runs += 1
        return super().encode_documents(texts, batch_size=batch_size)


def test_saved_run_is_reused_for_the_same_inputs(tmp_path):
    corpus = _write(tmp_path / "corpus.jsonl", [{"id": "a", "text": "胃痛怎么办"}, {"id": "b", "text": "头痛吃药"}])
    encoder = CountingEncoder()
    first = load_or_run(encoder, corpus, {"1": "胃痛"}, 2, tmp_path / "work", show_progress=False)
    again = load_or_run(encoder, corpus, {"1": "胃痛"}, 2, tmp_path / "work", show_progress=False)
    assert again == first and encoder.runs == 1


def test_a_work_folder_shared_by_two_tasks_ranks_each_task_on_its_own_corpus(tmp_path):
    """Two audits into one --out with numeric query ids: the second once got the first task's ranking
    (KeyError on a document id of the other corpus, or silently wrong pairs)."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    corpus_one = _write(one / "corpus.jsonl", [{"id": "d1", "text": "胃痛怎么办"}, {"id": "d2", "text": "头痛吃药"}])
    corpus_two = _write(two / "corpus.jsonl", [{"id": "x1", "text": "失眠怎么办"}, {"id": "x2", "text": "咳嗽吃药"}])
    work = tmp_path / "audit" / "work"
    load_or_run(CharEncoder(), corpus_one, {"1": "胃痛"}, 2, work, show_progress=False)
    run = load_or_run(CharEncoder(), corpus_two, {"1": "失眠"}, 2, work, show_progress=False)
    assert {d for d, _ in run["1"]} == {"x1", "x2"}
    assert run["1"][0][0] == "x1"


def test_an_edited_corpus_or_changed_query_text_runs_again(tmp_path):
    corpus = _write(tmp_path / "corpus.jsonl", [{"id": "a", "text": "胃痛怎么办"}, {"id": "b", "text": "头痛吃药"}])
    encoder = CountingEncoder()
    load_or_run(encoder, corpus, {"1": "胃痛"}, 2, tmp_path / "work", show_progress=False)
    run = load_or_run(encoder, corpus, {"1": "头痛"}, 2, tmp_path / "work", show_progress=False)
    assert encoder.runs == 2 and run["1"][0][0] == "b"
    _write(corpus, [{"id": "a", "text": "胃痛怎么办"}, {"id": "c", "text": "头痛吃药"}])
    os.utime(corpus, ns=(1, 1))  # a different modification time even on a coarse-clock file system
    run = load_or_run(encoder, corpus, {"1": "头痛"}, 2, tmp_path / "work", show_progress=False)
    assert encoder.runs == 3 and run["1"][0][0] == "c"
