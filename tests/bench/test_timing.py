"""The step timer kept on disk: seconds add up across invocations of a resumed run."""

from __future__ import annotations

import json

import pytest

import care.bench.timing as timing
from care.bench.timing import KeptStepTimer
from care.data.errors import DataFormatError


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_seconds_add_up_across_invocations_and_a_crash_keeps_its_time(tmp_path, clock):
    path = tmp_path / "wall_seconds.json"
    first = KeptStepTimer(path)
    with first.step("care"):
        clock.now += 600.0
    with pytest.raises(RuntimeError), first.step("peer"):  # interrupted part-way
        clock.now += 100.0
        raise RuntimeError("killed")
    assert json.loads(path.read_text(encoding="utf-8")) == {"care": 600.0, "peer": 100.0}

    resumed = KeptStepTimer(path)  # the rerun: care is done (0 s), the peer finishes
    with resumed.step("care"):
        pass
    with resumed.step("peer"):
        clock.now += 50.0
    assert resumed.summary() == {"care": 600.0, "peer": 150.0, "total": 750.0}


@pytest.mark.parametrize("text, problem", [("{not json", "not JSON"), ('{"care": "ten"}', "step -> seconds"),
                                           ("[1, 2]", "step -> seconds")])
def test_a_broken_timings_file_is_named(tmp_path, text, problem):
    path = tmp_path / "wall_seconds.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFormatError, match=problem) as err:
        KeptStepTimer(path)
    assert err.value.path == path and "delete the file" in str(err.value)
