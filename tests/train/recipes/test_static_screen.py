"""The static tower screen at CI size: a validation split carved by component, each candidate trained through the
recipe's Stage I against a frozen tower, scored on validation beside the frozen tower's own query side, and the best
chosen in the selection protocol's block (selected on validation, every candidate's score)."""

from __future__ import annotations

import json

import pytest

from care.bench.selection import VALIDATION, Selection
from care.config import ConfigError
from care.errors import CareError
from care.train.recipes.static_query import StaticTowerConfig
from care.train.recipes.static_screen import (
    CHOSEN,
    E5_LABEL,
    METRIC,
    UNTRAINED_LABEL,
    ScreenPaths,
    run_static_screen,
    stage2_label,
)
from care.train.recipes.validation import ValidationConfig
from care.train.stage_settings import parse_settings

from ..trainer_fixtures import write_rows

TOPICS = ("高血压", "糖尿病", "胃炎", "失眠", "咳嗽", "贫血", "痛风", "哮喘", "便秘", "湿疹", "头痛", "发烧")
TINY = parse_settings(["optim.batch_size=4", "optim.max_steps=2", "runtime.cpu=true", "runtime.log_with=null",
                       "model.query_max_seq_length=32", "model.document_max_seq_length=32", "data.n_negatives=0",
                       "optim.warmup_ratio=0", "stage2:model.document_pooling=mean", "stage2:model.lora=null"],
                      source="test setting")


def test_the_screen_scores_every_candidate_on_validation_and_picks_one(tiny_dir, tmp_path) -> None:
    from care.models.static_tower import build_static_tower

    static = build_static_tower(tiny_dir / "tiny-bert", tmp_path / "static")
    train = write_rows(tmp_path / "train.jsonl", [{"query": f"{t}怎么办", "pos": [f"{t}的治疗和日常注意事项"]}
                                                  for t in TOPICS])
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"{t}的治疗和日常注意事项"}, ensure_ascii=False) + "\n"
                              for i, t in enumerate(TOPICS)), encoding="utf-8")
    paths = ScreenPaths(str(train), str(corpus), str(tmp_path / "screen"), str(tmp_path / "towers"))
    candidates = {"slow": StaticTowerConfig(lr=1e-6, token_weights=None, learn_weights=False),
                  "fast": StaticTowerConfig(lr=0.5)}
    frozen = str(tiny_dir / "tiny-bert")  # the frozen tower: Stage I's targets and the documents' vectors
    screen = run_static_screen(paths, candidates, max_pairs=6, teacher=frozen, static_spec=str(static),
                               document_spec=frozen, settings=TINY, stage2=CHOSEN,
                               stage2_lrs=(None, 0.1),
                               validation=ValidationConfig(share=0.34, min_queries=3))
    assert set(screen.scores) - {E5_LABEL, UNTRAINED_LABEL, "slow", "fast"} == {stage2_label(screen.chosen),
                                                                                stage2_label(screen.chosen, 0.1)}
    assert all(0 <= row[METRIC] <= 1 for row in screen.scores.values())
    assert screen.chosen == max(candidates, key=lambda name: screen.scores[name][METRIC])
    selection = Selection.from_dict(screen.selection(list(candidates)))
    assert selection.selected_on == VALIDATION and set(selection.candidates) == {"slow", "fast"}
    assert screen.ratio_to_e5()[E5_LABEL] == 1.0 and screen.split["held_out"] >= 3
    assert sum(1 for _ in open(tmp_path / "screen" / "train_subset.jsonl", encoding="utf-8")) == 6
    with pytest.raises(CareError, match="at least one candidate"):
        run_static_screen(paths, {})


def _corpus_with_sentences(path, topics=TOPICS):
    """Each document two sentences: its topic's treatment, then a sentence no training query holds."""
    path.write_text("".join(json.dumps({"_id": f"d{i}", "title": f"{t}的标题页面",
                                        "text": f"{t}的治疗和日常注意事项。{t}患者饮食需要清淡少盐"},
                                       ensure_ascii=False) + "\n" for i, t in enumerate(topics)), encoding="utf-8")
    return path


def test_alignment_text_adds_corpus_sentences_and_titles_as_query_side_rows(tmp_path) -> None:
    from care.data.training import QUERY_ALIGN, iter_training_file
    from care.train.recipes.static_screen import AlignmentText, alignment_file

    train = write_rows(tmp_path / "train.jsonl", [{"query": f"{t}怎么办", "pos": [f"{t}的治疗"]} for t in TOPICS[:4]])
    paths = ScreenPaths(str(train), str(_corpus_with_sentences(tmp_path / "corpus.jsonl")), str(tmp_path / "screen"),
                        str(tmp_path / "towers"))
    queries_only = list(iter_training_file(alignment_file(paths, train, AlignmentText())))
    assert sorted(r.query for r in queries_only) == sorted(f"{t}怎么办" for t in TOPICS[:4])
    every = AlignmentText(corpus_sentences=None)
    rows = list(iter_training_file(alignment_file(paths, train, every)))
    texts = {r.query for r in rows}
    assert all(r.type == QUERY_ALIGN for r in rows) and {f"{t}怎么办" for t in TOPICS[:4]} <= texts
    assert {f"{t}患者饮食需要清淡少盐" for t in TOPICS} <= texts  # every document's sentences, any topic
    assert any(text.startswith(f"{TOPICS[0]}的标题页面") for text in texts)  # the title joins the first sentence
    assert len(rows) == 4 + 2 * len(TOPICS)
    no_titles = AlignmentText(corpus_sentences=3, titles=False)
    assert no_titles.file_name() not in (every.file_name(), AlignmentText().file_name())
    assert len(list(iter_training_file(alignment_file(paths, train, no_titles)))) == 4 + 3
    assert AlignmentText.from_dict(every.to_dict()) == every
    with pytest.raises(ConfigError, match="corpus_sentences"):
        AlignmentText(corpus_sentences=-1)


def test_a_candidate_with_corpus_text_trains_on_every_row_and_its_own_alignment_rows(tiny_dir, tmp_path) -> None:
    from care.models.static_tower import build_static_tower
    from care.train.recipes.static_screen import AlignmentText, ScreenCandidate

    static = build_static_tower(tiny_dir / "tiny-bert", tmp_path / "static")
    train = write_rows(tmp_path / "train.jsonl", [{"query": f"{t}怎么办", "pos": [f"{t}的治疗和日常注意事项"]}
                                                  for t in TOPICS])
    paths = ScreenPaths(str(train), str(_corpus_with_sentences(tmp_path / "corpus.jsonl")), str(tmp_path / "screen"),
                        str(tmp_path / "towers"))
    candidates = {"queries": ScreenCandidate(StaticTowerConfig(lr=0.5)),
                  "corpus": ScreenCandidate(StaticTowerConfig(lr=0.5), AlignmentText(corpus_sentences=None))}
    frozen = str(tiny_dir / "tiny-bert")
    screen = run_static_screen(paths, candidates, max_pairs=None, teacher=frozen, static_spec=str(static),
                               document_spec=frozen, settings=TINY,
                               validation=ValidationConfig(share=0.34, min_queries=3, max_documents=None))
    assert screen.split["trained_rows"] == screen.split["train_rows"] == len(TOPICS) - screen.split["held_out"]
    assert screen.alignment_rows["queries"] == screen.split["train_rows"]
    assert screen.alignment_rows["corpus"] == screen.split["train_rows"] + 2 * len(TOPICS)
    assert screen.chosen in candidates and not (tmp_path / "screen" / "train_subset.jsonl").exists()
    selection = Selection.from_dict(screen.selection(list(candidates), "alignment text"))
    assert selection.setting == "alignment text" and set(selection.candidates) == set(candidates)
