"""``care.bench.locations`` (``benchmarks/_common.py`` re-exports it): the dev set from ``$CARE_DEV_SET`` only, and records that name no machine's paths."""

from __future__ import annotations

import pytest

from care.bench import locations
from care.bench.locations import DEV_SET_ENV, ROOT, dev_set, dev_set_or_none, portable


def test_an_unset_dev_set_stops_the_script_naming_the_variable(monkeypatch):
    monkeypatch.delenv(DEV_SET_ENV, raising=False)
    assert dev_set_or_none() is None
    with pytest.raises(SystemExit, match=r"set \$CARE_DEV_SET to its folder"):
        dev_set()


def test_a_dev_set_that_is_not_a_folder_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(DEV_SET_ENV, str(tmp_path / "missing"))
    with pytest.raises(SystemExit, match=r"\$CARE_DEV_SET is .*missing, which is not a folder"):
        dev_set()


def test_the_dev_set_is_the_folder_the_variable_names(monkeypatch, tmp_path):
    monkeypatch.setenv(DEV_SET_ENV, str(tmp_path))
    assert dev_set() == tmp_path


def test_portable_writes_dev_set_and_repository_paths_without_the_machine(monkeypatch, tmp_path):
    monkeypatch.setenv(DEV_SET_ENV, str(tmp_path / "toyhom"))
    (tmp_path / "toyhom").mkdir()
    value = {"data": tmp_path / "toyhom", "train": str(tmp_path / "toyhom" / "train.jsonl"),
             "runs": [str(ROOT / "runs" / "demo" / "index"), f"{ROOT}/runs/x?pooling=mean"],
             "root": str(ROOT), "elsewhere": "/opt/models/e5", "seed": 3, "spec": "e5"}
    assert portable(value) == {"data": "$CARE_DEV_SET", "train": "$CARE_DEV_SET/train.jsonl",
                               "runs": ["runs/demo/index", "runs/x?pooling=mean"], "root": ".",
                               "elsewhere": "/opt/models/e5", "seed": 3, "spec": "e5"}


def test_a_path_that_only_starts_like_the_repository_is_kept(monkeypatch):
    monkeypatch.delenv(DEV_SET_ENV, raising=False)
    sibling = f"{ROOT}-copy/runs"
    assert portable(sibling) == sibling


def test_the_locations_are_the_repositorys():
    assert (locations.ROOT / "pyproject.toml").is_file()
    assert locations.RESULTS == locations.ROOT / "benchmarks" / "results" and locations.RESULTS.is_dir()
    assert locations.RUNS == locations.ROOT / "runs"
