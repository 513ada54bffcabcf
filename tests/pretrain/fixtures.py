"""Helpers of the pretraining tests: a tiny corpus and tiny, fast configs."""

from __future__ import annotations

import json
from pathlib import Path

TEXTS = [
    "头痛可以服用布洛芬并注意休息。多喝温水，避免熬夜。",
    "发烧时多喝水可用对乙酰氨基酚退烧。体温过高请就医。",
    "胃疼可服用奥美拉唑保护胃黏膜。少吃辛辣刺激食物。",
    "咳嗽有痰可用氨溴索化痰。戒烟并保持室内湿润。",
    "高血压患者应低盐低脂饮食。坚持规律服用降压药。",
    "糖尿病患者可适量吃低糖水果。注意监测血糖变化。",
    "失眠可以规律作息睡前避免咖啡。必要时咨询医生。",
    "腹泻注意补液可服用蒙脱石散。饮食以清淡为主。",
]


def write_texts(path: Path, texts: list[str] = TEXTS, *, jsonl: bool = False) -> Path:
    if jsonl:
        body = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    else:
        body = "".join(t + "\n" for t in texts)
    path.write_text(body, encoding="utf-8")
    return path


def write_pairs(path: Path, texts: list[str] = TEXTS) -> Path:
    rows = [{"title": t.split("。")[0] + "。", "content": t.split("。", 1)[1]} for t in texts]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def config_dict(method: str, model: Path, data: Path, out: Path, **sections) -> dict:
    """A tiny config: batch 4, a few steps, CPU, no TensorBoard, no progress bar."""
    cfg = {
        "method": method,
        "output_dir": str(out),
        "seed": 3,
        "model": {"name_or_path": str(model), "max_seq_length": 32},
        "data": {"train_files": [str(data)]},
        "optim": {"batch_size": 4, "max_steps": 4, "lr": 1e-3, "warmup_ratio": 0.0},
        "checkpoint": {"every_steps": 100},
        "runtime": {"cpu": True, "log_with": None, "progress_bar": False, "log_every_steps": 1},
    }
    for name, values in sections.items():
        if isinstance(values, dict):
            cfg.setdefault(name, {}).update(values)
        else:
            cfg[name] = values
    return cfg
