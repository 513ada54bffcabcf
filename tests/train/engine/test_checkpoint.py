"""care.train.engine.checkpoint's schedule: by steps, by the clock, or both; always at the last step."""

from __future__ import annotations

import pytest

from care.config import ConfigError
from care.train.engine.checkpoint import CheckpointSchedule, checkpoint_root
from care.train.engine.config import CheckpointConfig, TrainConfig
from care.train.engine.trainer import train

from ..trainer_fixtures import tiny_config_dict


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _due(schedule: CheckpointSchedule, steps: range, clock: FakeClock | None = None, tick: float = 0.0) -> list[int]:
    out = []
    for step in steps:
        if clock is not None:
            clock.t += tick
        if schedule.due(step):
            out.append(step)
            schedule.saved()
    return out


def test_step_schedule_checkpoints_every_n_steps_and_at_the_end():
    assert _due(CheckpointSchedule(50, None, 182), range(1, 183)) == [50, 100, 150, 182]


def test_clock_schedule_checkpoints_once_the_interval_has_passed_since_the_last_one():
    clock = FakeClock()
    schedule = CheckpointSchedule(None, 1.0, 10, clock=clock)
    # 25 s per step: the minute is reached at step 3 (75 s), then 3 steps after each save
    assert _due(schedule, range(1, 11), clock, tick=25.0) == [3, 6, 9, 10]
    fast = FakeClock()
    assert _due(CheckpointSchedule(None, 5.0, 182, clock=fast), range(1, 183), fast, tick=0.1) == [182]


def test_both_triggers_whichever_comes_first():
    clock = FakeClock()
    schedule = CheckpointSchedule(4, 1.0, 9, clock=clock)
    # steps 1-2 take 40 s each: the clock fires at 2; then the step count at 4 and 8, the end at 9
    out = []
    for step, tick in zip(range(1, 10), [40, 40, 1, 1, 1, 1, 1, 1, 1]):
        clock.t += tick
        if schedule.due(step):
            out.append(step)
            schedule.saved()
    assert out == [2, 4, 8, 9]


def test_with_several_processes_the_main_process_clock_decides(monkeypatch):
    """A rank whose own clock says "not yet" still saves when rank 0 says so (and the reverse), so no
    rank waits alone in save_checkpoint's barrier."""
    from types import SimpleNamespace

    import accelerate.utils

    sent = []

    def rank0_says(value):
        def broadcast(objects, from_process=0):
            sent.append((list(objects), from_process))
            return [value]
        return broadcast

    clock = FakeClock()
    schedule = CheckpointSchedule(None, 1.0, 100, clock=clock)
    two = SimpleNamespace(num_processes=2)
    monkeypatch.setattr(accelerate.utils, "broadcast_object_list", rank0_says(True))
    assert schedule.due(5, two)  # this rank's clock: 0 s since the last save
    assert sent == [([False], 0)]
    clock.t += 120
    monkeypatch.setattr(accelerate.utils, "broadcast_object_list", rank0_says(False))
    assert not schedule.due(6, two)  # this rank is late, rank 0 is not
    assert schedule.due(100, two) and len(sent) == 2  # the last step needs no vote


@pytest.mark.parametrize(("fields", "message"), [
    ({"every_steps": None, "every_minutes": None}, "checkpoint.every_steps.*both are null"),
    ({"every_minutes": 0}, "checkpoint.every_minutes.*> 0"),
    ({"every_steps": 0}, "checkpoint.every_steps.*> 0"),
    ({"keep_last": 0}, "checkpoint.keep_last"),
])
def test_bad_checkpoint_settings_are_rejected_with_the_field(fields, message):
    with pytest.raises(ConfigError, match=message):
        CheckpointConfig(**fields).validate()


def test_pretrain_config_checks_the_same_settings():
    from care.pretrain.config import PretrainConfig

    with pytest.raises(ConfigError, match="checkpoint.every_minutes"):
        PretrainConfig.from_dict({"model": {"name_or_path": "m"}, "data": {"train_files": ["t.txt"]},
                                  "checkpoint": {"every_minutes": -1}})


def test_trainer_checkpoints_by_the_clock(tiny_dir, tmp_path, monkeypatch):
    """every_steps null + every_minutes: a slow clock (61 s per reading) checkpoints at every step; a
    generous interval writes only the last step's checkpoint."""
    import care.train.engine.checkpoint as checkpoint

    ticks = iter(range(0, 10**6, 61))
    monkeypatch.setattr(checkpoint, "now", lambda: float(next(ticks)))
    slow = tmp_path / "slow"
    cfg = tiny_config_dict(tiny_dir, "init_query", slow, optim={"max_steps": 3},
                           checkpoint={"every_steps": None, "every_minutes": 1, "keep_last": 10,
                                       "keep_after_training": True})
    train(TrainConfig.from_dict(cfg))
    assert sorted(p.name for p in checkpoint_root(slow).iterdir()) == ["step-1", "step-2", "step-3"]

    monkeypatch.undo()
    quick = tmp_path / "quick"
    cfg = tiny_config_dict(tiny_dir, "init_query", quick, optim={"max_steps": 3},
                           checkpoint={"every_steps": None, "every_minutes": 60, "keep_last": 10,
                                       "keep_after_training": True})
    train(TrainConfig.from_dict(cfg))
    assert sorted(p.name for p in checkpoint_root(quick).iterdir()) == ["step-3"]
