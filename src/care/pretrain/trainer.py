"""``pretrain``: run one RetroMAE or contrastive pretraining job through the engine's one training loop.

The objective is a task of :mod:`care.pretrain.tasks` and :class:`care.train.engine.trainer.Trainer` trains it
(accelerate, AdamW with linear warmup/decay, clipping, atomic checkpoints every ``checkpoint.every_steps`` steps
or ``checkpoint.every_minutes``, whichever comes first, and at the end). Each checkpoint holds weights,
optimizer, scheduler, every RNG state and the stream position; ``resume`` continues from the latest one, so a
run killed after a checkpoint ends with the same weights as an uninterrupted one.

Outputs in ``output_dir``: ``model/`` (the pretrained encoder as a plain ``AutoModel`` folder with its
tokenizer — use it as ``model.query_model`` of ``init_query``), ``metrics.jsonl``, ``logs/``
(TensorBoard), ``checkpoints/``, ``pretrain_config.yaml`` and ``pretrain_result.json`` (written last).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from care.pretrain.config import PretrainConfig
from care.pretrain.result import CONFIG_FILE, MODEL_DIRNAME, RESULT_FILE, PretrainResult, read_pretrain_result
from care.pretrain.tasks import PretrainTask, make_task
from care.train.engine.checkpoint import TrainerState
from care.train.engine.trainer import METRICS_FILE, Trainer

logger = logging.getLogger(__name__)

__all__ = ["CONFIG_FILE", "METRICS_FILE", "MODEL_DIRNAME", "RESULT_FILE", "Callback", "PretrainResult", "pretrain",
           "read_pretrain_result"]

#: ``callback(event, state)`` with event in {"step", "checkpoint"}.
Callback = Callable[[str, TrainerState], None]


def pretrain(config: PretrainConfig, *, resume: bool = False, callbacks: Sequence[Callback] = (),
             task: PretrainTask | None = None) -> PretrainResult:
    """Run one pretraining job to the end and save ``output_dir/model``.

    Args:
        config: validated :class:`PretrainConfig`.
        resume: continue from the latest checkpoint (a finished run is returned as is). Without it,
            an ``output_dir`` holding checkpoints is an error.
        callbacks: ``callback(event, state)`` after each optimiser step / checkpoint.
        task: the objective (default: :func:`care.pretrain.tasks.make_task` of ``config.method``).
    """
    config.validate()
    task = task or make_task(config)
    engine_callbacks = [lambda _trainer, event, state, cb=cb: cb(event, state) for cb in callbacks]
    return Trainer(task, callbacks=engine_callbacks).train(resume=resume)
