"""User-facing errors: anything the user can fix is a :class:`CareError` (or a
:class:`~care.data.errors.DataFormatError`) and the CLI prints it as one line, not a traceback
(:func:`care.cli.run_cli`). This module imports nothing of care: every layer may raise these."""

from __future__ import annotations


class CareError(Exception):
    """An error in how care was called (unknown task, missing model path, bad option)."""


class DimensionMismatchError(CareError):
    """Query and document embeddings of one model do not share a dimension."""
