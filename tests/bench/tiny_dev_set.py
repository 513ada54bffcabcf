"""A dev-set-shaped folder (``corpus.jsonl``, ``train.jsonl`` of ``{query, positive}``, ``queries.jsonl``, the test
split) and tiny models over its texts, so the real-weight drivers run end to end in seconds with a tiny BERT in
e5's place."""

from __future__ import annotations

import json
from pathlib import Path

TOPICS = ["高血压", "糖尿病", "胃炎", "失眠", "咳嗽", "贫血", "痛风", "哮喘", "便秘", "湿疹", "头痛", "发烧", "腹泻", "鼻炎",
          "肺炎", "肝炎", "肾炎", "关节炎", "颈椎病", "腰痛", "牙痛", "中耳炎", "结膜炎", "荨麻疹", "带状疱疹", "甲亢",
          "冠心病", "心律失常", "骨折", "扁桃体炎"]
#: Questions per topic: 8 x 30 topics = 240 training rows, 30 answer groups (a 10 % hold-out keeps 20+ queries).
QUESTIONS = ["{}怎么办", "{}吃什么药", "{}如何治疗", "{}要注意什么", "{}会好吗", "{}严重吗", "{}挂什么科", "{}能根治吗"]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def write_dev_set(root: Path) -> Path:
    """The folder ``root/dev`` and tiny models in ``root/tiny`` (``tiny-bert`` stands in for e5); returns ``root/dev``."""
    from care.models.presets import make_tiny_models

    folder = root / "dev"
    folder.mkdir(parents=True)
    answers = [f"{t}患者应按时用药并定期复查。{t}要注意休息。" for t in TOPICS]
    _write(folder / "corpus.jsonl", [{"id": f"d{i}", "text": a} for i, a in enumerate(answers)])
    _write(folder / "train.jsonl", [{"query": q.format(t), "positive": a} for t, a in zip(TOPICS, answers)
                                    for q in QUESTIONS])
    queries = [{"id": f"q{i}", "text": f"{t}的原因"} for i, t in enumerate(TOPICS)]
    _write(folder / "queries.jsonl", queries)
    _write(folder / "test_queries.jsonl", queries)
    (folder / "test_qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(len(TOPICS))), encoding="utf-8")
    make_tiny_models([*answers, *(q.format(t) for t in TOPICS for q in QUESTIONS), *(q["text"] for q in queries)],
                     root / "tiny")
    return folder
