"""A judging run killed mid-way (SIGKILL) and resumed gives the same output as an uninterrupted run,
and the server never grades a (query, passage) pair twice for the same judge."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from care.curate.judges.cache import JudgmentCache
from care.curate.judges.config import JudgesConfig
from care.curate.judges.factory import build_judges
from care.curate.judges.labelling import judge_file
from care.testing.chat_server import FakeChatServer

N_QUERIES, N_DOCS = 8, 9
STALL_AFTER_CALLS = 6
WAIT_S = 60


def _write_inputs(tmp: Path, base_url: str, cache: str) -> tuple[Path, Path]:
    pairs = tmp / "pairs.jsonl"
    with pairs.open("w", encoding="utf-8") as fh:
        for q in range(N_QUERIES):
            for d in range(N_DOCS):
                fh.write(json.dumps({"query_id": f"q{q}", "query": f"第{q}个问题：咳嗽发热怎么办",
                                     "doc_id": f"d{d}", "passage": f"第{d}段：多喝水，必要时退热"}, ensure_ascii=False) + "\n")
    config = tmp / "judges.json"
    config.write_text(json.dumps({
        "cache": cache,
        "judges": [
            {"id": "judge-a", "base_url": base_url, "model": "model-a", "passages_per_call": 3, "max_concurrency": 2,
             "backoff_base_s": 0.01, "timeout_s": 5},
            {"id": "judge-b", "base_url": base_url, "model": "model-b", "passages_per_call": 4, "max_concurrency": 2,
             "backoff_base_s": 0.01, "timeout_s": 5},
        ],
    }), encoding="utf-8")
    return pairs, config


def _cached_rows(path: Path) -> int:
    if not path.is_file():
        return 0
    try:
        with sqlite3.connect(path, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _cli(pairs: Path, out: Path, config: Path) -> list[str]:
    return [sys.executable, "-m", "care.cli", "-q", "curate", "judge", str(pairs), str(out), "--judges", str(config),
            "--no-progress"]


def test_killed_run_resumes_without_rejudging(tmp_path):
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir()
    run_dir.mkdir()
    with FakeChatServer() as ref_server:
        pairs, config = _write_inputs(ref_dir, ref_server.base_url, "cache.sqlite")
        cfg = JudgesConfig.load(config)
        with JudgmentCache(cfg.cache) as cache:
            judge_file(pairs, build_judges(cfg), ref_dir / "out.jsonl", cache=cache, voting=cfg.voting, show_progress=False)
    reference = (ref_dir / "out.jsonl").read_text(encoding="utf-8")

    with FakeChatServer() as server:
        pairs, config = _write_inputs(run_dir, server.base_url, "cache.sqlite")
        out, cache_path = run_dir / "out.jsonl", run_dir / "cache.sqlite"
        server.stall_after(STALL_AFTER_CALLS)
        proc = subprocess.Popen(_cli(pairs, out, config), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + WAIT_S
        # kill once the client is blocked on the stalled server and has committed every answered pair
        while time.time() < deadline:
            if server.stalled and _cached_rows(cache_path) == len(server.answered):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        else:
            raise AssertionError("the run never reached the stall point")
        answered_before = len(server.answered)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        server.release()
        assert 0 < answered_before < 2 * N_QUERIES * N_DOCS
        assert not out.exists()  # nothing half-written

        server._stall_after = None
        done = subprocess.run(_cli(pairs, out, config), capture_output=True, timeout=WAIT_S)
        assert done.returncode == 0, done.stderr.decode()

    assert out.read_text(encoding="utf-8") == reference
    graded = server.answered
    assert len(graded) == len(set(graded)) == 2 * N_QUERIES * N_DOCS  # every pair once per judge, never twice


def test_killed_run_costs_are_counted_across_resumes(tmp_path):
    """Usage is on disk per request: after a kill -9 and a resume the report's totals cover both runs,
    and the requests in flight at the kill (paid by an API, answers lost) are counted, not forgotten."""
    with FakeChatServer() as server:
        pairs, config = _write_inputs(tmp_path, server.base_url, "cache.sqlite")
        out, cache_path = tmp_path / "out.jsonl", tmp_path / "cache.sqlite"
        server.stall_after(STALL_AFTER_CALLS)
        proc = subprocess.Popen(_cli(pairs, out, config), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + WAIT_S
        while time.time() < deadline and server.stalled < 2:  # judge-a runs 2 requests at a time
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert server.stalled == 2, "the run never reached the stall point"  # each counted as sent before it left
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        with JudgmentCache(cache_path) as cache:
            killed = cache.usage("judge-a")
        assert killed.calls == STALL_AFTER_CALLS and killed.sent == STALL_AFTER_CALLS + 2 and killed.unrecorded == 2
        server.release()
        server._stall_after = None
        done = subprocess.run(_cli(pairs, out, config), capture_output=True, timeout=WAIT_S)
        assert done.returncode == 0, done.stderr.decode()
        assert "sent but their replies never recorded" in done.stderr.decode()
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text(encoding="utf-8"))
    answered = {m: sum(1 for r in server.requests if r.get("model") == m) for m in ("model-a", "model-b")}
    total_a, run_a = report["usage_total"]["judge-a"], report["usage"]["judge-a"]
    assert total_a["calls"] == answered["model-a"] == STALL_AFTER_CALLS + run_a["calls"]  # both runs, not the last
    assert total_a["sent"] == answered["model-a"] + 2 and total_a["unrecorded"] == 2
    assert total_a["prompt_tokens"] > run_a["prompt_tokens"]
    assert report["usage_total"]["judge-b"]["calls"] == answered["model-b"] == report["usage"]["judge-b"]["calls"]
    assert report["usage_total"]["judge-b"]["unrecorded"] == 0
