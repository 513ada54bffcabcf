"""The shared benchmark-result schema: filled-in provenance, atomic write, read-back and refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from care.bench.record import BenchmarkRecord, git_commit, read_records, write_record
from care.errors import CareError


def _repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    for args in (["add", "a.txt"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True)
    return tmp_path


def test_record_fills_provenance_and_reads_back(tmp_path):
    repo = _repo(tmp_path)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    record = BenchmarkRecord("exp", "seed0", config={"lr": 2e-5}, seeds=[0], scores={"e5": {"ndcg_at_10": 0.26}},
                             latencies={"e5": {"p50_ms": 12.0}})
    path = write_record(record, repo / "results")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert path == repo / "results" / "exp" / "seed0.json"
    assert data["commit"] == sha and data["command"].startswith("python ")
    assert data["machine"]["cores"] >= 1 and "load_average_1min" in data["machine"]
    assert read_records(repo / "results", "exp")["seed0"].scores == {"e5": {"ndcg_at_10": 0.26}}
    (repo / "a.txt").write_text("changed", encoding="utf-8")
    assert git_commit(repo) == f"{sha}+dirty"


def test_commit_outside_a_checkout_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("CARE_GIT_COMMIT", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # git must not find a repository above
    assert git_commit(tmp_path) == "unknown"
    monkeypatch.setenv("CARE_GIT_COMMIT", "abc123")
    assert git_commit(tmp_path) == "abc123"
    assert git_commit(_repo(tmp_path / "repo")) != "abc123"  # a real checkout wins


def test_record_refuses_files_outside_the_schema(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "old.json").write_text('{"ndcg": 1}', encoding="utf-8")
    with pytest.raises(CareError, match="old.json: not a benchmark record .*missing schema"):
        read_records(tmp_path, "exp")
    with pytest.raises(CareError, match="plain file name"):
        write_record(BenchmarkRecord("exp", "a/b", config={}), tmp_path)


def test_a_module_run_with_dash_m_is_recorded_as_one(tmp_path):
    """``python -m benchmarks.x --a b`` is recorded as that, not as the file path ``-m`` resolved to."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "tool.py").write_text("from care.bench.record import invocation\nprint(invocation())\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pkg.tool", "--seed", "0", "two words"], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "python -m pkg.tool --seed 0 'two words'"
    done = subprocess.run([sys.executable, "pkg/tool.py", "--seed", "1"], cwd=tmp_path, capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "python pkg/tool.py --seed 1"


def test_a_command_names_data_folders_by_their_variable_and_no_machine_path(tmp_path):
    """An argument under ``$CARE_DEV_SET`` is recorded as ``$CARE_DEV_SET/...`` (a shell expands it again), one
    under the working directory relative to it; other arguments as they were."""
    dev = tmp_path / "dev set"
    dev.mkdir()
    (tmp_path / "tool.py").write_text("from care.bench.record import invocation\nprint(invocation())\n",
                                      encoding="utf-8")
    env = {**os.environ, "CARE_DEV_SET": str(dev)}
    done = subprocess.run([sys.executable, "tool.py", str(dev), str(dev / "train.jsonl"), "--out",
                           str(tmp_path / "runs" / "x"), "/elsewhere/y"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "python tool.py $CARE_DEV_SET $CARE_DEV_SET/train.jsonl --out runs/x /elsewhere/y"


def test_a_pinned_commit_is_the_one_a_record_written_after_a_later_commit_names(tmp_path):
    from care.bench.record import pin_commit

    repo = _repo(tmp_path)
    started = pin_commit(repo / "results")  # a long run starts
    (repo / "a.txt").write_text("edited while it trains", encoding="utf-8")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "y"], cwd=repo,
                   check=True)
    path = write_record(BenchmarkRecord("exp", "seed0", config={}), repo / "results")
    assert json.loads(path.read_text(encoding="utf-8"))["commit"] == started != git_commit(repo)
    other = write_record(BenchmarkRecord("exp", "x", config={}), repo / "elsewhere")  # another root: asked now
    assert json.loads(other.read_text(encoding="utf-8"))["commit"] == git_commit(repo)


def test_a_dirty_tree_is_refused_at_the_start_unless_allowed_and_then_the_diff_is_hashed(tmp_path):
    import hashlib

    from care.bench.record import DIFF_HASH_KEY, code_state, pin_commit

    repo = _repo(tmp_path)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert code_state(repo).diff_sha256 is None and pin_commit(repo / "clean") == sha
    (repo / "a.txt").write_text("edited before the run", encoding="utf-8")
    with pytest.raises(CareError, match=r"probe: the checkout has uncommitted changes .*--allow-dirty"):
        pin_commit(repo / "results", where="probe")
    assert pin_commit(repo / "results", allow_dirty=True) == f"{sha}+dirty"
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=repo, capture_output=True, check=True).stdout
    path = write_record(BenchmarkRecord("exp", "seed0", config={}), repo / "results")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["commit"] == f"{sha}+dirty" and data["extra"][DIFF_HASH_KEY] == hashlib.sha256(diff).hexdigest()
    (repo / "a.txt").write_text("another edit", encoding="utf-8")  # another diff, another hash
    assert code_state(repo).diff_sha256 not in (None, data["extra"][DIFF_HASH_KEY])


def test_a_commit_typed_into_a_record_is_refused(tmp_path):
    repo = _repo(tmp_path)
    with pytest.raises(CareError, match="commit 'abc123' was given, but the code is"):
        write_record(BenchmarkRecord("exp", "seed2", config={}, commit="abc123"), repo / "results")
    sha = git_commit(repo)  # the checkout's own commit given back (a record read and rewritten) is fine
    assert json.loads(write_record(BenchmarkRecord("exp", "x", config={}, commit=sha),
                                   repo / "results").read_text(encoding="utf-8"))["commit"] == sha
