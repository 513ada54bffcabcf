"""User-facing errors: anything the user can fix is a :class:`CareError` (or a
:class:`~care.data.errors.DataFormatError`) and the CLI prints it as one line, not a traceback."""

from __future__ import annotations

import logging
import sys

import typer

from care.data.errors import DataFormatError

logger = logging.getLogger(__name__)


class CareError(Exception):
    """An error in how care was called (unknown task, missing model path, bad option)."""


class DimensionMismatchError(CareError):
    """Query and document embeddings of one model do not share a dimension."""


USER_ERRORS: tuple[type[BaseException], ...] = (CareError, DataFormatError, FileNotFoundError)


def run_cli(app: typer.Typer) -> None:
    """Run a typer app; print user errors as ``error: ...`` and exit with status 2."""
    try:
        app()
    except USER_ERRORS as exc:
        logger.debug("user error", exc_info=True)
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)
