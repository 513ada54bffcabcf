"""A small retrieval folder exactly as BEIR publishes one, and training files whose positive is a string.

- ``corpus.jsonl``: ``{"_id", "title", "text", "metadata"}`` rows; ``d5`` is title-only (``"text": ""``),
  ``d3`` and ``d8`` have an empty title;
- ``queries.jsonl``: ``{"_id", "text", "metadata"}``;
- ``qrels/test.tsv`` and ``qrels/dev.tsv`` (no ``qrels.tsv``);
- ``train_pos.jsonl`` (``"pos": "one answer"``) and ``train_positive.jsonl`` (``"positive": "one answer"``),
  whose answers are the documents as encoders see them (title + text).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DOCS = [
    ("d1", "高血压饮食", "高血压患者应低盐饮食，每天食盐少于5克，多吃新鲜蔬菜。"),
    ("d2", "糖尿病", "糖尿病患者要控制主食，定时监测血糖，规律服用降糖药。"),
    ("d3", "", "哮喘发作时使用吸入剂，避免接触过敏原和冷空气。"),
    ("d4", "胃炎", "胃炎要少吃辛辣刺激食物，按时吃饭，必要时服用抑酸药。"),
    ("d5", "失眠的自我调节：睡前少看手机，固定作息时间", ""),
    ("d6", "感冒", "感冒多喝水，注意休息，发热超过三天要就医。"),
    ("d7", "痛风", "痛风患者要少吃动物内脏和海鲜，每天多喝水促进尿酸排出。"),
    ("d8", "", "颈椎病患者要避免长时间低头，适当做颈部拉伸运动。"),
    ("d9", "贫血", "缺铁性贫血可以多吃瘦肉和动物肝脏，必要时补充铁剂。"),
    ("d10", "便秘", "便秘要多吃富含膳食纤维的食物，多喝水，适量运动。"),
]
#: (query id, text, its relevant document); the first six are the test split, the rest dev.
QUERIES = [("q1", "高血压饮食要注意什么", "d1"), ("q2", "血糖高怎么控制", "d2"), ("q3", "哮喘发作怎么办", "d3"),
           ("q4", "胃炎能吃辣吗", "d4"), ("q5", "晚上睡不着怎么办", "d5"), ("q6", "感冒发烧要去医院吗", "d6"),
           ("q7", "痛风不能吃什么", "d7"), ("q8", "颈椎不舒服怎么缓解", "d8")]
TEST_QUERIES = 6
TITLE_ONLY = "d5"
QRELS_HEADER = "query-id\tcorpus-id\tscore\n"


def full_text(doc_id: str) -> str:
    """The document as encoders see it, by hand: ``title text`` (the title alone when the text is empty)."""
    _, title, text = next(d for d in DOCS if d[0] == doc_id)
    return f"{title} {text}".strip() if title else text


def metadata(doc_id: str) -> dict:
    return {"metadata": {"url": f"https://example.org/{doc_id}"}}


@dataclass(frozen=True)
class BeirFiles:
    folder: Path
    corpus: Path
    queries: Path
    train_pos: Path
    train_positive: Path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def write_beir_folder(root: Path) -> BeirFiles:
    """Write the folder (``root/beir``) and the two training files into ``root``."""
    folder = root / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = _jsonl(folder / "corpus.jsonl", [{"_id": i, "title": t, "text": x, **metadata(i)} for i, t, x in DOCS])
    queries = _jsonl(folder / "queries.jsonl", [{"_id": q, "text": t, "metadata": {}} for q, t, _ in QUERIES])
    (folder / "qrels" / "test.tsv").write_text(
        QRELS_HEADER + "".join(f"{q}\t{d}\t1\n" for q, _, d in QUERIES[:TEST_QUERIES]), encoding="utf-8")
    (folder / "qrels" / "dev.tsv").write_text(
        QRELS_HEADER + "".join(f"{q}\t{d}\t1\n" for q, _, d in QUERIES[TEST_QUERIES:]), encoding="utf-8")
    train_pos = _jsonl(root / "train_pos.jsonl", [{"query": t, "pos": full_text(d)} for _, t, d in QUERIES])
    train_positive = _jsonl(root / "train_positive.jsonl", [{"query": t, "positive": full_text(d)} for _, t, d in QUERIES])
    return BeirFiles(folder, corpus, queries, train_pos, train_positive)
