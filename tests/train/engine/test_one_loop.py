"""One training loop: a CARE stage and a pretraining objective both train through the engine's ``Trainer``;
the loop's pieces (optimiser step, schedule, clipping, checkpoint loading, the accelerator) live nowhere else;
and the task protocol alone is enough for exact resume (a toy task, crashed after a checkpoint)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import care
from care.config import Config
from care.errors import CareError
from care.train.engine.checkpoint import TrainerState, list_checkpoints
from care.train.engine.config import CheckpointConfig, RuntimeConfig, TrainConfig
from care.train.engine.task import LoopSettings, MicroBatch
from care.train.engine.trainer import Trainer

from ..trainer_fixtures import tiny_config_dict

PACKAGE = Path(care.__file__).resolve().parent
#: The one file that may run a training loop.
LOOP = PACKAGE / "train" / "engine" / "trainer.py"
#: What only a training loop does.
LOOP_CALLS = re.compile(r"\.step\(\)|clip_grad_norm_\(|zero_grad\(|get_linear_schedule_with_warmup|"
                        r"\bAccelerator\(|\.load_state\(")


def test_no_training_loop_outside_the_engine():
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path != LOOP
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if LOOP_CALLS.search(line)]
    assert not found, "training-loop calls outside care/train/engine/trainer.py:\n" + "\n".join(found)
    assert LOOP_CALLS.search(LOOP.read_text(encoding="utf-8"))  # the pattern does find the loop


def test_a_stage_and_a_pretraining_task_train_through_the_same_loop(tiny_dir, tmp_path, monkeypatch):
    from care.pretrain.config import PretrainConfig
    from care.pretrain.trainer import pretrain
    from care.train.engine.trainer import train

    torch.set_num_threads(1)
    seen: list[tuple[str, int]] = []
    real_fire = Trainer._fire

    def spy(self, event):
        if event == "step":
            seen.append((type(self.task).__name__, self.state.global_step))
        real_fire(self, event)

    monkeypatch.setattr(Trainer, "_fire", spy)
    train_result = train(TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2", tmp_path / "stage",
                                                                optim={"max_steps": 2})))
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"第{i}句：头痛可以服用布洛芬。\n" for i in range(6)), encoding="utf-8")
    pre = PretrainConfig.from_dict({
        "method": "retromae", "output_dir": str(tmp_path / "pre"), "seed": 3,
        "model": {"name_or_path": str(tiny_dir / "tiny-bert"), "max_seq_length": 32},
        "data": {"train_files": [str(texts)]}, "optim": {"batch_size": 3, "max_steps": 2, "lr": 1e-3},
        "checkpoint": {"every_steps": 100},
        "runtime": {"cpu": True, "log_with": None, "progress_bar": False, "log_every_steps": 1}})
    pre_result = pretrain(pre)

    assert seen == [("StageTask", 1), ("StageTask", 2), ("RetroMAETask", 1), ("RetroMAETask", 2)]
    assert train_result.global_step == pre_result.global_step == 2
    for out in (tmp_path / "stage", tmp_path / "pre"):  # the loop's own record, the same for both
        rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1, 2] and {"epoch", "loss", "lr"} <= set(rows[0])
        assert not (out / "checkpoints").exists()  # removed once the outputs are written


# ---------------------------------------------------------------------- a toy task: y = 3x on a Linear(1, 1)
class _ToyConfig(Config):
    def to_dict(self) -> dict:
        return {"toy": True}


class ToyTask:
    """Regress ``y = 3x``: batch ``i`` of epoch ``e`` is a function of ``(e, i)`` only."""

    name = "toy"
    config_file = "toy_config.json"
    BATCHES = 4

    def __init__(self, out: Path, steps: int) -> None:
        self.config = _ToyConfig()
        self.steps = steps
        self.settings = LoopSettings(out, 5, RuntimeConfig(cpu=True, log_with=None, progress_bar=False,
                                                           log_every_steps=1),
                                     CheckpointConfig(every_steps=2, keep_last=1, keep_after_training=True),
                                     0.05, (0.9, 0.999), 1e-8, 0.25, 1.0, 2)
        self.saved: dict | None = None

    def finished(self, *, resume: bool):
        return None

    def setup(self, accelerator) -> int:
        return self.steps

    def build(self):
        return nn.Linear(1, 1), []

    def param_groups(self, model, side):
        return [{"params": list(model.parameters()), "weight_decay": 0.0}]

    def restore(self, state: TrainerState) -> None:
        return None

    def batches(self, state: TrainerState, accelerator) -> Iterator[MicroBatch]:
        while True:
            for i in range(state.batches_in_epoch, self.BATCHES):
                g = torch.Generator().manual_seed(state.epoch * 100 + i)
                state.batches_in_epoch = i + 1
                yield MicroBatch(torch.randn(2, 1, generator=g))
            state.epoch, state.batches_in_epoch = state.epoch + 1, 0

    def forward_backward(self, model, micro, accelerator):
        x = micro.batch
        loss = ((model(x) - 3 * x) ** 2).mean()
        accelerator.backward(loss)
        return loss

    def after_optimizer_step(self) -> None:
        return None

    def save(self, model, accelerator, state):
        self.saved = {k: v.clone() for k, v in accelerator.unwrap_model(model).state_dict().items()}
        return state.global_step


def test_a_toy_task_resumes_after_a_crash_to_the_uninterrupted_weights(tmp_path):
    steps = 7  # crosses an epoch boundary (4 batches per epoch); the crash at step 4 lands on it
    straight = ToyTask(tmp_path / "straight", steps)
    assert Trainer(straight).train() == steps

    class Crash(Exception):
        pass

    def crash(trainer, event, state):
        if event == "checkpoint" and state.global_step == 4:
            raise Crash

    killed = ToyTask(tmp_path / "killed", steps)
    with pytest.raises(Crash):
        Trainer(killed, callbacks=[crash]).train()
    assert [p.name for p in list_checkpoints(tmp_path / "killed")] == ["step-4"]
    with pytest.raises(CareError, match="--resume"):
        Trainer(ToyTask(tmp_path / "killed", steps)).train()
    resumed = ToyTask(tmp_path / "killed", steps)
    assert Trainer(resumed).train(resume=True) == steps
    for name, value in straight.saved.items():
        torch.testing.assert_close(resumed.saved[name], value, rtol=0, atol=0, msg=name)
    losses = [[json.loads(x)["loss"] for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
              for run in ("straight", "killed")]
    assert losses[0] == losses[1] and len(losses[0]) == steps
    assert json.loads((tmp_path / "killed" / "toy_config.json").read_text()) == {"toy": True}
