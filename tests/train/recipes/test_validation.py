"""The recipe's safety net: the validation split holds out whole query–answer components, is carved once,
and a model scoring below the one it started from is flagged (real scoring, no mocked metric)."""

from __future__ import annotations

import json

import pytest

from care.data.splits import hold_out_components
from care.data.training import iter_training_file
from care.errors import CareError
from care.train.recipes.validation import (
    HELD_OUT_FILE,
    SCORES_FILE,
    SPLIT_FILE,
    TASK_FOLDER,
    StageValidator,
    ValidationConfig,
    carve_validation,
    without_held_out,
)


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _search_log(n_groups: int = 40):
    """Search-log shaped rows: each group has two near-identical queries sharing a title, and a second title
    shared with the next query of the group (components of 2 rows)."""
    rows = []
    for g in range(n_groups):
        rows.append({"query": f"高血压{g}怎么办", "pos": [f"高血压{g}的治疗方法", f"高血压{g}吃什么药"]})
        rows.append({"query": f"高血压{g}怎么治", "pos": [f"高血压{g}吃什么药"]})
    return rows


def test_components_are_held_out_whole():
    pairs = [(r["query"], r["pos"]) for r in _search_log()]
    held = hold_out_components(pairs, 0.1, seed=1)
    assert len(held) >= 0.1 * len(pairs)
    kept_texts = {t for i, (q, pos) in enumerate(pairs) if i not in held for t in (q, *pos)}
    assert not kept_texts & {t for i in held for t in (pairs[i][0], *pairs[i][1])}
    assert all((i ^ 1) in held for i in held)  # both rows of a group together
    assert hold_out_components(pairs, 0.1, seed=1) == held != hold_out_components(pairs, 0.1, seed=2)
    with pytest.raises(CareError, match="share"):
        hold_out_components(pairs, 0, seed=0)


def test_carve_writes_the_split_once_and_adds_missing_positives(tmp_path):
    from care.data.retrieval import load_retrieval_folder

    train = _write(tmp_path / "train.jsonl", _search_log())
    corpus = _write(tmp_path / "corpus.jsonl", [{"_id": f"d{g}", "title": f"高血压{g}的治疗方法", "text": ""}
                                                for g in range(40)])
    config = ValidationConfig(share=0.1, min_queries=4)
    split = carve_validation(train, corpus, tmp_path / "val", config, seed=3)
    assert split is not None and split.rows + split.held_out == 80 and split.held_out >= 8
    kept = list(iter_training_file(split.train_file))
    held = list(iter_training_file(tmp_path / "val" / HELD_OUT_FILE))
    assert not {r.query for r in kept} & {r.query for r in held}
    task = load_retrieval_folder(split.task_dir)
    assert len(task.queries) == split.held_out
    # a held-out row's every positive is relevant; the titles missing from the corpus were added
    first = task.qrels[sorted(task.queries)[0]]
    assert len(first) in (1, 2) and any(d.startswith("heldout-") for q in task.qrels.values() for d in q)
    stamp = (tmp_path / "val" / SPLIT_FILE).stat().st_mtime_ns
    assert carve_validation(train, corpus, tmp_path / "val", config, seed=3) == split
    assert (tmp_path / "val" / SPLIT_FILE).stat().st_mtime_ns == stamp  # reused, not carved again
    again = carve_validation(train, corpus, tmp_path / "val", config, seed=4)  # other settings: carved again
    assert again is not None and (tmp_path / "val" / SPLIT_FILE).stat().st_mtime_ns != stamp


def test_too_few_queries_means_no_validation(tmp_path, caplog):
    train = _write(tmp_path / "train.jsonl", _search_log(5))
    assert carve_validation(train, None, tmp_path / "val", ValidationConfig(min_queries=20)) is None
    assert "fewer than validation.min_queries" in caplog.text
    assert not (tmp_path / "val" / TASK_FOLDER).exists()
    assert carve_validation(train, None, tmp_path / "val", ValidationConfig(enabled=False)) is None


def test_alignment_rows_of_held_out_texts_are_dropped(tmp_path):
    train = _write(tmp_path / "train.jsonl", _search_log())
    split = carve_validation(train, None, tmp_path / "val", ValidationConfig(share=0.1, min_queries=4))
    held = next(iter(iter_training_file(tmp_path / "val" / HELD_OUT_FILE)))
    alignment = _write(tmp_path / "align.jsonl", [
        {"query": held.query, "pos": [held.query], "type": "query_align"},
        {"query": "无关的问题", "pos": ["无关的问题"], "type": "query_align"}])
    kept = without_held_out(alignment, split, tmp_path / "val" / "alignment.jsonl")
    assert [r.query for r in iter_training_file(kept)] == ["无关的问题"]


def test_a_stage_worse_than_its_start_is_flagged(tmp_path, tiny_dir):
    """BM25 on a lexical task against a random-init tiny model: scored for real, the tiny one is far worse."""
    rows = [{"query": f"{topic}怎么办", "pos": [f"{topic}的治疗和日常注意事项"]}
            for topic in ("高血压", "糖尿病", "胃炎", "失眠", "咳嗽", "贫血", "痛风", "哮喘", "便秘", "湿疹")]
    train = _write(tmp_path / "train.jsonl", rows)
    config = ValidationConfig(share=0.5, min_queries=3)
    split = carve_validation(train, None, tmp_path / "val", config)
    validator = StageValidator(split.task_dir, tmp_path / "val", config)
    base = validator.score("base document model", "bm25:char")
    broken = validator.score("stage2", str(tiny_dir / "tiny-bert"), started_from="base document model")
    assert base.main > 0.9 and broken.main < base.main
    assert broken.flagged and broken.delta == pytest.approx(broken.main - base.main, abs=1e-4)
    warnings = validator.warnings("stage2", ["base document model"])
    assert any("scores below base document model" in w for w in warnings)
    assert "**(worse)**" in validator.table()
    kept = json.loads((tmp_path / "val" / SCORES_FILE).read_text(encoding="utf-8"))["models"]
    assert kept["stage2"]["flagged"] is True
    again = StageValidator(split.task_dir, tmp_path / "val", config)  # a rerun reads the kept score
    assert again.score("base document model", "bm25:char").scores == base.scores
