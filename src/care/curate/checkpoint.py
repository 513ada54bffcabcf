"""Crash-safe streaming output: an append-only partial file plus an atomically written progress file.

A streaming step (anonymise, diversify, ...) reads its input in chunks; after each chunk it appends
the chunk's output rows to ``<out>.partial``, fsyncs, and then atomically rewrites
``<out>.progress.json`` with the number of input lines consumed, the partial file's byte length and
any step-specific state (counters). After a crash, :meth:`StreamCheckpoint.resume` truncates the
partial file back to the last recorded length (dropping rows of a chunk whose progress was never
recorded) and tells the step where to continue, so no finished work is lost or repeated. On
success :meth:`StreamCheckpoint.finish` renames the partial file onto the output (atomic) and removes
the progress file. The progress file also records the content digest of every input file the step reads, so a
run resumed after an input was edited (whose finished lines would then no longer match the output) is refused.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.data.io import require_file, write_json
from care.errors import CareError
from care.hashes import file_sha256

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
        inputs: the files the step reads (its input rows, queries, corpus); resuming after one of them changed
            is refused, since the lines already done were read from the old content.
    """

    def __init__(self, out_path: str | Path, settings: dict[str, Any], inputs: Iterable[str | Path] = ()) -> None:
        self.out_path = Path(out_path)
        self.inputs = [Path(p) for p in inputs]
        self.input_digests: dict[str, str] = {}
        self.partial_path = self.out_path.with_name(self.out_path.name + ".partial")
        self.progress_path = self.out_path.with_name(self.out_path.name + ".progress.json")
        self.settings = json.loads(json.dumps(settings, ensure_ascii=False))
        self.progress = Progress()

    def resume(self) -> Progress:
        """Load the progress of an interrupted run (or start fresh) and truncate the partial output."""
        self.input_digests = {str(p): file_sha256(require_file(p)) for p in self.inputs}  # before any file is made
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        if self.progress_path.is_file() and self.partial_path.is_file():
            saved = json.loads(self.progress_path.read_text(encoding="utf-8"))
            if saved.get("settings") != self.settings:
                raise CareError(
                    f"{self.progress_path} belongs to a run with different settings "
                    f"({saved.get('settings')} vs {self.settings}); rerun with the same options, "
                    "or delete it and the .partial file to start over"
                )
            self._check_inputs(saved.get("inputs"), saved["lines_done"])
            self.progress = Progress(saved["lines_done"], saved["bytes_done"], saved.get("state", {}))
            with self.partial_path.open("r+b") as fh:
                fh.truncate(self.progress.bytes_done)
            logger.info("resuming %s after %d input lines", self.out_path, self.progress.lines_done)
        else:
            self.partial_path.write_bytes(b"")
            self.progress = Progress()
            self._write_progress()
        return self.progress

    def _check_inputs(self, saved: dict[str, str] | None, lines_done: int) -> None:
        """Refuse to resume when an input file's content differs from the interrupted run's (progress files
        written before inputs were recorded carry none and are trusted)."""
        if saved is None:
            return
        changed = [path for path, digest in self.input_digests.items() if saved.get(path, digest) != digest]
        if changed:
            raise CareError(f"{changed[0]} changed since the interrupted run recorded {self.progress_path}: the "
                            f"output of the {lines_done} input lines (or queries) it finished came from the old "
                            f"content; restore the file, or delete "
                            f"{self.partial_path} and {self.progress_path} to start over on the new one")

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
            "inputs": self.input_digests,
            "lines_done": self.progress.lines_done,
            "bytes_done": self.progress.bytes_done,
            "state": self.progress.state,
        })
