"""``care serve`` in a child process for a measurement: started with one variant's ServeConfig, waited for
(``/health``), its CPU time read, and always stopped (bounded) when the measurement ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from care.bench.service_load.config import VARIANTS, ServiceLoadConfig
from care.errors import CareError

#: How a child process runs the ``care`` command with this interpreter (the installed script's target).
CLI_ENTRY = "from care.cli import main; main()"
#: Seconds a service may take to load its index and encoder and answer /health.
STARTUP_TIMEOUT_S = 600.0
#: Seconds between /health polls while it starts.
POLL_S = 0.5
#: Seconds a stopped service may take to exit before it is killed.
STOP_TIMEOUT_S = 30.0


def serve_command(config: ServiceLoadConfig, port: int, serve_config: Path) -> list[str]:
    """The ``care serve`` command line of one service (``care.cli:main`` run by this Python)."""
    command = [sys.executable, "-c", CLI_ENTRY, "serve", "--index", config.index, "--port", str(port),
               "--threads", str(config.threads), "--config", str(serve_config), "--verify", config.verify]
    if config.model:
        command += ["--model", config.model]
    if config.onnx:
        command += ["--onnx", config.onnx, *(["--int8"] if config.int8 else [])]
    return command


def wait_healthy(process: subprocess.Popen, url: str, timeout_s: float, name: str) -> None:
    """Return once the service at ``url`` answers ``GET /health`` with 200, polling every :data:`POLL_S`.

    Raises:
        CareError: ``process`` exited first, or ``timeout_s`` passed (``name`` says which service and where its
            log is).
    """
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise CareError(f"{name}: exited with {process.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(POLL_S)
    raise CareError(f"{name}: did not answer /health within {timeout_s:.0f} s")


class SpawnedService:
    """One variant's ``care serve`` on a free port of 127.0.0.1; a context manager yielding itself.

    Args:
        config: the measurement's settings (index, encoder, threads).
        variant: a name of :data:`~care.bench.service_load.config.VARIANTS`.
        work: folder for the service's config file and log (``serve-<variant>.json`` / ``.log``).
    """

    def __init__(self, config: ServiceLoadConfig, variant: str, work: Path) -> None:
        from care.serve.server import free_port

        self.variant, self.port = variant, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        work.mkdir(parents=True, exist_ok=True)
        serve_config = work / f"serve-{variant}.json"
        serve_config.write_text(json.dumps(VARIANTS[variant]), encoding="utf-8")
        self.log_path = work / f"serve-{variant}.log"
        env = {**os.environ, "OMP_NUM_THREADS": str(config.threads)}  # FAISS's threads, as the bare loop's
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(serve_command(config, self.port, serve_config), stdout=log,
                                            stderr=subprocess.STDOUT, env=env)

    def __enter__(self) -> SpawnedService:
        try:
            wait_healthy(self.process, self.url, STARTUP_TIMEOUT_S,
                         f"care serve ({self.variant}); see {self.log_path}")
        except CareError:
            self.stop()
            raise
        return self

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the service process has used."""
        import psutil

        times = psutil.Process(self.process.pid).cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __exit__(self, *_: Any) -> None:
        self.stop()


class RunningService:
    """A service somebody else started (``--url``): measured, never started or stopped; no CPU reading."""

    def __init__(self, url: str) -> None:
        self.variant, self.url = "running", url.rstrip("/")

    def __enter__(self) -> RunningService:
        return self

    def __exit__(self, *_: Any) -> None:
        return None

    def cpu_seconds(self) -> float | None:
        return None
