"""``care.train.engine.step_timing``: the trainer stops after the timed steps, before its final saves."""

from __future__ import annotations

from care.train.engine.config import TrainConfig
from care.train.engine.step_timing import time_training_steps

from ..trainer_fixtures import tiny_config_dict


def test_three_steps_are_timed_and_the_run_stops_before_its_final_saves(tiny_dir, tmp_path):
    out = tmp_path / "stage2"
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2", out, optim={"max_steps": 6}))
    timing = time_training_steps(config, 3, "cpu")
    assert timing.steps == 3 and len(timing.losses) == 3 and all(loss > 0 for loss in timing.losses)
    assert timing.steady_steps_timed == 2 and 0 < timing.steady_step_seconds < timing.seconds_total
    assert timing.peak_memory_gib is None and timing.memory_at_start_gib is None  # the CPU has no GPU counter
    assert not (out / "model").exists() and not (out / "train_result.json").exists()
