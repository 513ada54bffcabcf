"""Crash-safe streaming output: an append-only partial file plus an atomically written progress file.

A streaming step (anonymise, diversify, ...) reads its input in chunks; after each chunk it appends
the chunk's output rows to ``<out>.partial``, fsyncs, and then atomically rewrites
``<out>.progress.json`` with the number of input lines consumed, the partial file's byte length and
any step-specific state (counters). After a crash, :meth:`StreamCheckpoint.resume` truncates the
partial file back to the last recorded length (dropping rows of a chunk whose progress was never
recorded) and tells the step where to continue, so no finished work is lost or repeated. On
success :meth:`StreamCheckpoint.finish` renames the partial file onto the output (atomic) and removes
the progress file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.data.io import write_json
from care.errors import CareError

logger = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where a streaming step stands: input lines consumed, output bytes kept, step state."""

    lines_done: int = 0
    bytes_done: int = 0
    state: dict[str, Any] = field(default_factory=dict)


class StreamCheckpoint:
    """Append-only output with resumable progress for one output file.

    Args:
        out_path: the final output file.
        settings: the step's settings (JSON-serialisable); resuming with different settings is refused
            so that one output never mixes two configurations.
    """

    def __init__(self, out_path: str | Path, settings: dict[str, Any]) -> None:
        self.out_path = Path(out_path)
        self.partial_path = self.out_path.with_name(self.out_path.name + ".partial")
        self.progress_path = self.out_path.with_name(self.out_path.name + ".progress.json")
        self.settings = json.loads(json.dumps(settings, ensure_ascii=False))
        self.progress = Progress()

    def resume(self) -> Progress:
        """Load the progress of an interrupted run (or start fresh) and truncate the partial output."""
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        if self.progress_path.is_file() and self.partial_path.is_file():
            saved = json.loads(self.progress_path.read_text(encoding="utf-8"))
            if saved.get("settings") != self.settings:
                raise CareError(
                    f"{self.progress_path} belongs to a run with different settings "
                    f"({saved.get('settings')} vs {self.settings}); rerun with the same options, "
                    "or delete it and the .partial file to start over"
                )
            self.progress = Progress(saved["lines_done"], saved["bytes_done"], saved.get("state", {}))
            with self.partial_path.open("r+b") as fh:
                fh.truncate(self.progress.bytes_done)
            logger.info("resuming %s after %d input lines", self.out_path, self.progress.lines_done)
        else:
            self.partial_path.write_bytes(b"")
            self.progress = Progress()
            self._write_progress()
        return self.progress

    def append(self, rows: Iterable[dict[str, Any]], *, lines_done: int, state: dict[str, Any] | None = None) -> None:
        """Durably append ``rows`` and record that ``lines_done`` input lines are finished."""
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        with self.partial_path.open("ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        self.progress.lines_done = lines_done
        self.progress.bytes_done += len(data)
        if state is not None:
            self.progress.state = state
        self._write_progress()

    def finish(self) -> None:
        """Move the complete output into place and forget the progress."""
        os.replace(self.partial_path, self.out_path)
        self.progress_path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove the partial output and the progress (a run refused before it produced anything)."""
        self.partial_path.unlink(missing_ok=True)
        self.progress_path.unlink(missing_ok=True)

    def _write_progress(self) -> None:
        write_json(self.progress_path, {
            "settings": self.settings,
            "lines_done": self.progress.lines_done,
            "bytes_done": self.progress.bytes_done,
            "state": self.progress.state,
        })
