"""The run manifest pins the code each start of a run ran on; ``care run`` refuses a dirty checkout of care unless
``--allow-dirty``, and then keeps the diff's hash."""

from __future__ import annotations

import pytest

from care.bench.record import CodeState
from care.errors import CareError
from care.pipeline.manifest import RunManifest


def test_each_start_on_other_code_is_pinned_once_and_reads_back(tmp_path):
    manifest = RunManifest(tmp_path, {})
    manifest.pin_code(CodeState("abc").to_dict())
    manifest.pin_code(CodeState("abc").to_dict())  # a resume on the same code: nothing new
    manifest.pin_code(CodeState("abc+dirty", "f" * 64).to_dict())
    back = RunManifest.load(tmp_path)
    assert [(c["commit"], c["diff_sha256"]) for c in back.code] == [("abc", None), ("abc+dirty", "f" * 64)]
    assert all(c["started"] for c in back.code)


def test_care_run_refuses_a_dirty_checkout_unless_allowed(tmp_path, monkeypatch):
    from care.pipeline.cli import demo_config_path
    from care.pipeline.config import load_run_config
    from care.pipeline.run import run_pipeline

    monkeypatch.setattr("care.bench.record.code_state", lambda root=None: CodeState("abc+dirty", "e" * 64))
    config = load_run_config(demo_config_path(), ["steps=[report]"])
    with pytest.raises(CareError, match=r"care run: the checkout has uncommitted changes .*--allow-dirty"):
        run_pipeline(config, tmp_path / "run", allow_dirty=False)
    assert not (tmp_path / "run").exists()  # refused before the folder is touched
    run_pipeline(config, tmp_path / "run", allow_dirty=True)  # allowed: it runs, and names the diff it ran with
    code = RunManifest.load(tmp_path / "run").code
    assert [(c["commit"], c["diff_sha256"]) for c in code] == [("abc+dirty", "e" * 64)]


def test_the_care_run_command_passes_allow_dirty(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from care.cli import app
    from care.pipeline.cli import demo_config_path

    seen = {}

    def run_pipeline(config, output, **kwargs):
        seen.update(kwargs)
        raise CareError("stop here")

    monkeypatch.setattr("care.pipeline.run.run_pipeline", run_pipeline)
    for args, allowed in (([], False), (["--allow-dirty"], True)):
        CliRunner().invoke(app, ["run", str(demo_config_path()), "-o", str(tmp_path / "r"), *args])
        assert seen["allow_dirty"] is allowed
