"""The static tower screen at CI size: a validation split carved by component, each candidate trained through the
recipe's Stage I against a frozen tower, scored on validation beside the frozen tower's own query side, and the best
chosen in the selection protocol's block (selected on validation, every candidate's score)."""

from __future__ import annotations

import json

import pytest

from care.bench.selection import VALIDATION, Selection
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
