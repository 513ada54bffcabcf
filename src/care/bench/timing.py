"""Phase timers for a benchmark run, and a step timer kept on disk for runs that resume."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from care.data.errors import DataFormatError
from care.data.io import write_json

PHASES = ("load_s", "encode_queries_s", "encode_documents_s", "index_s", "search_s", "metrics_s")
ENCODING_PHASES = ("encode_queries_s", "encode_documents_s")


@contextmanager
def _add_elapsed(seconds: dict[str, float], name: str) -> Iterator[None]:
    """Add the block's wall-clock seconds to ``seconds[name]`` (also when the block raises)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0


class PhaseTimer:
    """Accumulates wall-clock seconds per phase; :meth:`summary` adds ``total_s`` and the share of
    wall time spent outside encoding."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._start = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with _add_elapsed(self.seconds, name):
            yield

    def summary(self) -> dict[str, float]:
        total = time.perf_counter() - self._start
        encoding = sum(self.seconds[p] for p in ENCODING_PHASES)
        out = {k: round(v, 4) for k, v in self.seconds.items()}
        out["total_s"] = round(total, 4)
        out["outside_encoding_share"] = round(1.0 - encoding / total, 4) if total > 0 else 0.0
        return out


class KeptStepTimer:
    """Wall-clock seconds per step of a resumable run, added up across invocations.

    A run that stops part-way and is started again spends its time in several invocations; each one
    only sees its own clock. This timer keeps the seconds per step in a JSON file (``{step: seconds}``,
    rewritten atomically after every step, also when the step raises), so a resumed run reports what
    the whole run cost, and a rerun that finds everything done adds ~0 s instead of replacing it.

    Args:
        path: the JSON file (created on the first finished step).

    Raises:
        DataFormatError: ``path`` exists but is not a JSON object of numbers.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.seconds: dict[str, float] = {}
        if self.path.is_file():
            try:
                kept = json.loads(self.path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise DataFormatError(self.path, f"not JSON ({err.msg})", line=err.lineno,
                                      hint="delete the file to start the timings from zero") from err
            if not isinstance(kept, dict) or not all(isinstance(v, (int, float)) for v in kept.values()):
                raise DataFormatError(self.path, "expected an object of step -> seconds",
                                      hint="delete the file to start the timings from zero")
            self.seconds = {str(k): float(v) for k, v in kept.items()}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block and add its seconds to ``name`` (kept even when the block raises)."""
        try:
            with _add_elapsed(self.seconds, name):
                yield
        finally:
            write_json(self.path, self.seconds)

    def summary(self) -> dict[str, float]:
        """``{step: seconds}`` over every invocation so far, with ``total`` (their sum)."""
        out = {k: round(v, 3) for k, v in self.seconds.items()}
        out["total"] = round(sum(self.seconds.values()), 3)
        return out
