"""A console a person can read during a run: step progress and summaries on the terminal, the rest in ``run.log``.

While a run is going, :func:`route_logs` adds a file handler that takes every record at INFO and above
(from care and from the libraries: accelerate's checkpoint saves, transformers' and Python's warnings)
and filters the terminal's handlers down to the pipeline's own progress (``care.pipeline`` at INFO),
care's warnings and errors, and the libraries' errors. Records marked :data:`FILE_ONLY` (a failed step's
traceback) go to the file alone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

LOG_FILE = "run.log"
#: Loggers whose INFO records the terminal shows (step progress and summaries).
CONSOLE_INFO_LOGGERS: tuple[str, ...] = ("care.pipeline",)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: ``logger.error(..., extra={FILE_ONLY: True})``: a record for ``run.log`` alone, never the terminal (a failed
#: step's traceback: the terminal gets one line from the command, and the traceback only with ``--verbose``).
FILE_ONLY = "care_file_only"


class ConsoleFilter(logging.Filter):
    """Pass the pipeline's INFO (``progress_level``), care's WARNING and above, and everyone's ERROR and above."""

    def __init__(self, progress_level: int = logging.INFO) -> None:
        super().__init__()
        self.progress_level = progress_level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        name = record.name
        if any(name == n or name.startswith(n + ".") for n in CONSOLE_INFO_LOGGERS):
            return record.levelno >= self.progress_level
        if name == "care" or name.startswith("care."):
            return record.levelno >= logging.WARNING
        return False


class FileOnlyFilter(logging.Filter):
    """Drop the records marked :data:`FILE_ONLY` (installed on the terminal's handlers, verbose or not)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, FILE_ONLY, False)


def _terminal_handlers(root: logging.Logger) -> list[logging.Handler]:
    return [h for h in root.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]


@contextlib.contextmanager
def route_logs(folder: str | Path, *, verbose: bool = False, progress_bars: bool = True) -> Iterator[Path]:
    """Send every log record to ``<folder>/run.log`` and only the pipeline's progress to the terminal.

    Args:
        folder: the run folder (created).
        verbose: leave the terminal unfiltered (everything also goes to the file), but for the records
            marked :data:`FILE_ONLY`.
        progress_bars: ``False`` also silences the libraries' own progress bars (transformers' weight loading).
    Yields:
        The log file's path.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOG_FILE
    root = logging.getLogger()
    file_handler = logging.FileHandler(path, encoding="utf-8")
    file_handler.setLevel(logging.DEBUG if verbose else logging.INFO)
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%H:%M:%S"))
    terminal = _terminal_handlers(root)
    added_terminal = None
    if not terminal:  # called from Python without logging set up: show the progress anyway
        added_terminal = logging.StreamHandler()
        added_terminal.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%H:%M:%S"))
        root.addHandler(added_terminal)
        terminal = [added_terminal]
    previous_level = root.level
    console_filter = ConsoleFilter(max(logging.INFO, previous_level))  # --quiet keeps the progress quiet too
    file_only = FileOnlyFilter()
    for handler in terminal:
        handler.addFilter(file_only)
        if not verbose:
            handler.addFilter(console_filter)
    root.setLevel(min(previous_level or logging.INFO, logging.INFO))
    root.addHandler(file_handler)
    logging.captureWarnings(True)
    restore_transformers = _route_transformers(progress_bars)
    try:
        yield path
    finally:
        restore_transformers()
        logging.captureWarnings(False)
        root.removeHandler(file_handler)
        file_handler.close()
        for handler in terminal:
            handler.removeFilter(console_filter)
            handler.removeFilter(file_only)
        if added_terminal is not None:
            root.removeHandler(added_terminal)
        root.setLevel(previous_level)


def _route_transformers(progress_bars: bool):
    """transformers logs through its own terminal handler: send its records through the root logger instead
    (and, without ``progress_bars``, turn its progress bars off)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a core dependency
        return lambda: None
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()
    if not progress_bars:
        hf_logging.disable_progress_bar()

    def restore() -> None:
        hf_logging.disable_propagation()
        hf_logging.enable_default_handler()
        if bars_were_on:
            hf_logging.enable_progress_bar()

    return restore
