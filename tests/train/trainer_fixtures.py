"""Helpers of the trainer tests: a toy training set and tiny, fast stage configs."""

from __future__ import annotations

import json
from pathlib import Path

PAIRS = [
    ("头痛怎么办", "头痛可以服用布洛芬并注意休息"),
    ("发烧怎么退烧", "发烧时多喝水可用对乙酰氨基酚退烧"),
    ("胃疼吃什么药", "胃疼可服用奥美拉唑保护胃黏膜"),
    ("咳嗽有痰怎么办", "咳嗽有痰可用氨溴索化痰"),
    ("高血压饮食", "高血压患者应低盐低脂饮食"),
    ("糖尿病能吃水果吗", "糖尿病患者可适量吃低糖水果"),
    ("失眠怎么调理", "失眠可以规律作息睡前避免咖啡"),
    ("腹泻怎么办", "腹泻注意补液可服用蒙脱石散"),
]


def toy_rows() -> list[dict]:
    """8 retrieval rows, each with 2 hard negatives (other rows' answers)."""
    n = len(PAIRS)
    return [{"query": q, "pos": [d], "neg": [PAIRS[(i + 1) % n][1], PAIRS[(i + 3) % n][1]]}
            for i, (q, d) in enumerate(PAIRS)]


def alignment_rows() -> list[dict]:
    """Stage I rows: every text its own positive, one other text of the same side as negative."""
    n = len(PAIRS)
    rows = [{"query": q, "pos": [q], "neg": [PAIRS[(i + 1) % n][0]], "type": "query_align"}
            for i, (q, _) in enumerate(PAIRS)]
    rows += [{"query": d, "pos": [d], "neg": [PAIRS[(i + 1) % n][1]], "type": "doc_align"}
             for i, (_, d) in enumerate(PAIRS)]
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def tiny_config_dict(root: Path, stage: str, out: Path, **sections) -> dict:
    """A tiny, fast config for ``stage`` (8 rows, batch 8, a few steps, CPU, no TensorBoard)."""
    data = {
        "stage": stage,
        "output_dir": str(out),
        "seed": 7,
        "model": {"query_model": str(root / "tiny-bert"), "document_model": str(root / "tiny-qwen3"),
                  "query_max_seq_length": 32, "document_max_seq_length": 32,
                  "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        "data": {"train_file": str(root / ("alignment.jsonl" if stage == "stage1" else "train.jsonl")),
                 "n_negatives": 1 if stage == "stage1" else 2},
        "optim": {"batch_size": 8, "max_steps": 6, "lr": 1e-3, "warmup_ratio": 0.0},
        "loss": {"temperature": 0.1 if stage == "stage1" else 0.02},  # the paper's τ per stage
        "checkpoint": {"every_steps": 100},
        "runtime": {"cpu": True, "log_with": None, "progress_bar": False, "log_every_steps": 1},
    }
    for name, values in sections.items():
        if isinstance(values, dict):
            data[name] = {**data.get(name, {}), **values}
        else:
            data[name] = values
    return data


def folder_digest(folder: Path) -> str:
    """SHA-256 over every file's name and bytes under ``folder`` (to show a frozen model was not written)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def frozen_teacher(config):
    """The stage's view of the frozen tower at ``config.model.document_model`` as its teacher."""
    from care.train.engine.stage import build_stage
    from care.train.engine.teacher import TowerEncoder
    from care.train.engine.towers import load_document_tower

    return build_stage(config).teacher_encoder(TowerEncoder(load_document_tower(config.model, trainable=False), "t", "fp"),
                                               config.model.query_prompt)


def toy_stage_loss(config, towers: dict) -> float:
    """The stage's loss on the whole toy set (every row, both of its negatives), without gradients.

    ``towers`` maps ``"query"`` / ``"document"`` to a model in eval mode (``encode``) and ``"teacher"`` to
    :func:`frozen_teacher` (``encode_documents``), for the towers the stage routes fields to.
    """
    import torch

    from care.train.engine.data import TrainingBatch
    from care.train.engine.stage import TEACHER, build_stage

    stage = build_stage(config)
    rows = toy_rows()
    batch = TrainingBatch([r["query"] for r in rows], [r["pos"][0] for r in rows],
                          [n for r in rows for n in r["neg"]], 2, [None] * len(rows), [None] * len(rows))
    with torch.no_grad():
        emb = {f: torch.from_numpy(towers[TEACHER].encode_documents(t)) if stage.field_towers[f] == TEACHER
               else towers[stage.field_towers[f]].encode(t, convert_to_tensor=True)
               for f, t in stage.batch_texts(batch, config.model.query_prompt).items()}
        out = stage.compute_loss(emb, n_negatives=2)
    return float(out if isinstance(out, torch.Tensor) else out.loss)
