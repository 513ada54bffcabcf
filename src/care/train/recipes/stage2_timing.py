"""A few Stage II steps of the real trainer at a setting's shapes (``benchmarks/bench_gpu_shapes.py``).

:func:`bench_stage2` trains ``configs/care_paper/stage2.yaml`` with the setting's towers and typed overrides
(:class:`care.bench.gpu_shapes.Setting`) on :data:`STAGE2_ROWS` synthetic rows whose documents are as long as the
document tower reads (the memory worst case), and times the steps with
:func:`care.train.engine.step_timing.time_training_steps`: it stops after the steps, before the final checkpoint
and model saves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from care.bench.gpu_shapes import Setting
from care.bench.locations import CONFIGS
from care.config import Override, apply_overrides
from care.data.io import write_jsonl

#: The paper's Stage II config the steps train.
PAPER_STAGE2 = CONFIGS / "care_paper" / "stage2.yaml"
#: Stage II rows written (each a query, its positive and ``n_negatives`` negatives, all full length).
STAGE2_ROWS = 256
#: Characters of a row's query (the start of its positive).
QUERY_CHARS = 30
#: Steps between checkpoints: more than any timed run takes, so none is written.
NO_CHECKPOINT_STEPS = 100_000


def stage2_rows(texts: list[str], length: int, negatives: int) -> list[dict[str, Any]]:
    """:data:`STAGE2_ROWS` training rows whose documents are ``length`` characters: each text runs on into the next
    ones; a row's negatives are the next ``negatives`` documents."""
    joined = "".join(texts)
    joined *= length // len(joined) + 2
    stride = max(1, (len(joined) - length) // STAGE2_ROWS)
    long = [joined[i * stride:i * stride + length] for i in range(STAGE2_ROWS)]
    return [{"query": t[:QUERY_CHARS], "pos": [t], "neg": [long[(i + k) % len(long)] for k in range(1, negatives + 1)]}
            for i, t in enumerate(long)]


def bench_stage2(query_dir: Path, document_dir: Path, texts: list[str], work: Path, steps: int,
                 setting: Setting) -> dict:
    """``steps`` Stage II steps of the real trainer at the paper's settings (configs/care_paper/stage2.yaml) with
    the setting's overrides, under ``work``.

    Returns:
        steps, seconds_total, batch_size, negatives, grad_cache_chunk_size, document_max_length,
        gradient_checkpointing, lora_r, peak_memory_gib, memory_at_start_gib, losses, steady_step_seconds,
        steady_steps_timed.
    """
    from care.train.engine.config import TrainConfig, load_config
    from care.train.engine.step_timing import time_training_steps

    overrides: list[Override] = [
        ("output_dir", str(work / "stage2")), ("model.query_model", str(query_dir)),
        ("model.document_model", str(document_dir)), ("model.query_pooling", "cls"),
        ("model.trust_remote_code", False), ("optim.max_steps", steps), ("runtime.log_with", None),
        ("runtime.progress_bar", False), ("checkpoint.every_steps", NO_CHECKPOINT_STEPS), *setting.stage2_overrides]
    data = apply_overrides(load_config(PAPER_STAGE2).to_dict(), overrides)
    negatives = data["data"]["n_negatives"]
    length = data["model"]["document_max_seq_length"]
    train_file = work / "stage2_train.jsonl"
    write_jsonl(train_file, stage2_rows(texts, length, negatives))
    data = apply_overrides(data, [("data.train_file", str(train_file))])
    timing = time_training_steps(TrainConfig.from_dict(data), steps, setting.device)
    return {"steps": timing.steps, "seconds_total": timing.seconds_total, "batch_size": data["optim"]["batch_size"],
            "negatives": negatives, "grad_cache_chunk_size": data["optim"]["grad_cache_chunk_size"],
            "document_max_length": length, "gradient_checkpointing": data["model"]["gradient_checkpointing"],
            "lora_r": data["model"]["lora"]["r"], "peak_memory_gib": timing.peak_memory_gib,
            "memory_at_start_gib": timing.memory_at_start_gib, "losses": timing.losses,
            "steady_step_seconds": timing.steady_step_seconds, "steady_steps_timed": timing.steady_steps_timed}
