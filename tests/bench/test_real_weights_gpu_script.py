"""``benchmarks/real_weights_gpu.sh``: it refuses to start without its inputs and says which one is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_weights_gpu.sh"


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--seeds", "0"], env={"PATH": os.environ["PATH"], **env},
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)


def test_each_missing_input_is_named(tmp_path) -> None:
    assert "IMAGE: the shrunk E5S1 image" in _run(tmp_path).stderr
    assert "ARCHIVE: the data archive" in _run(tmp_path, IMAGE="e5.bin").stderr
    done = _run(tmp_path, IMAGE="e5.bin", ARCHIVE="data.tar.xz")
    assert done.returncode != 0 and "OUT: results root" in done.stderr


def test_an_unreadable_archive_stops_it_before_any_training(tmp_path) -> None:
    (tmp_path / "data.tar.xz").write_bytes(b"not an archive")
    done = _run(tmp_path, IMAGE="e5.bin", ARCHIVE=str(tmp_path / "data.tar.xz"), OUT=str(tmp_path / "out"),
                SCRATCH=str(tmp_path / "scratch"))
    assert done.returncode != 0
    assert not (tmp_path / "out" / "real_weights").exists()
