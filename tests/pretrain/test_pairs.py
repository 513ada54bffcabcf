"""Unsupervised pair building: first-sentence splits and field pairs; the toyhom dev set when present."""

from __future__ import annotations

import json

import pytest

from care.bench.locations import DEV_SET_ENV, dev_set_or_none
from care.data.errors import DataFormatError
from care.pretrain.pairs import iter_pairs, make_pairs, split_first_sentence

#: The dev set ($CARE_DEV_SET), or None: the test that reads it is skipped then.
TOYHOM = dev_set_or_none()


def test_split_first_sentence():
    assert split_first_sentence("头痛怎么办？多休息，必要时服药。") == ("头痛怎么办？", "多休息，必要时服药。")
    assert split_first_sentence("Take rest. Drink  water\nand sleep.") == ("Take rest.", "Drink water and sleep.")
    assert split_first_sentence("没有句号的一段话") is None
    assert split_first_sentence("好。剩下的内容足够长") is None  # first sentence too short
    assert split_first_sentence("好。剩下的内容足够长", min_chars=1) == ("好。", "剩下的内容足够长")


def test_make_pairs_modes(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"id": "1", "text": "高血压要低盐饮食。每天监测血压。"}, {"id": "2", "text": "无句号"}]), encoding="utf-8")
    stats = make_pairs([corpus], tmp_path / "p.jsonl")
    assert stats == {"pairs": 1, "skipped": 1}
    assert [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()] == [
        {"title": "高血压要低盐饮食。", "content": "每天监测血压。"}]
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"query": "头痛", "positive": "休息"}, ensure_ascii=False) + "\n"
                     + json.dumps({"query": "咳嗽"}, ensure_ascii=False) + "\n", encoding="utf-8")
    pairs = iter_pairs([train], mode="fields", fields=("query", "positive"))
    assert next(pairs) == {"title": "头痛", "content": "休息"}
    with pytest.raises(DataFormatError, match="train.jsonl, line 2, field 'positive'"):
        next(pairs)


@pytest.mark.skipif(TOYHOM is None or not TOYHOM.is_dir(), reason=f"dev set absent (${DEV_SET_ENV})")
def test_toyhom_corpus_gives_pairs():
    stats: dict[str, int] = {}
    pairs = list(iter_pairs([TOYHOM / "corpus.jsonl"], stats=stats))
    assert len(pairs) > 0.5 * (stats["pairs"] + stats["skipped"])
    assert all(p["title"] and p["content"] for p in pairs)


def test_a_beir_corpus_makes_pairs_in_both_modes(tmp_path):
    """A corpus exactly as BEIR publishes it was refused: split mode at its title-only document, fields mode
    (title, text) at its first empty title; both are skipped (and counted) instead."""
    from tests.beir_folder import DOCS, write_beir_folder

    files = write_beir_folder(tmp_path)
    stats: dict[str, int] = {}
    split = list(iter_pairs([files.corpus], stats=stats))  # every text there is one sentence: nothing to split
    assert split == [] and stats == {"pairs": 0, "skipped": len(DOCS)}
    stats = {}
    fields = list(iter_pairs([files.corpus], mode="fields", fields=("title", "text"), stats=stats))
    assert fields == [{"title": t, "content": x} for _, t, x in DOCS if t and x]
    assert stats == {"pairs": len(fields), "skipped": len(DOCS) - len(fields)}


@pytest.mark.parametrize("spelling", ["pos", "positive"])
def test_fields_mode_reads_positives_either_way(tmp_path, spelling):
    """The default fields (query, positive) refused build-train's own output, which spells it 'pos'."""
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"query": "头痛", spelling: ["休息", "吃药"]}, ensure_ascii=False) + "\n", encoding="utf-8")
    for fields in (("query", "positive"), ("query", "pos")):
        assert list(iter_pairs([train], mode="fields", fields=fields)) == [{"title": "头痛", "content": "休息"}]
