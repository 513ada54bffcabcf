"""The one error type for bad input files: it names the file, line and field and says how to fix it."""

from __future__ import annotations

from pathlib import Path


class DataFormatError(ValueError):
    """A data file that cannot be used as it is.

    Attributes:
        path: the offending file (or folder).
        line: 1-based line number, when the problem is on one line.
        field: the JSON field / TSV column at fault, when known.
        problem: what is wrong.
        hint: how to fix it.
    """

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.line = line
        self.field = field
        self.problem = problem
        self.hint = hint
        where = str(self.path)
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field '{field}'"
        message = f"{where}: {problem}"
        if hint:
            message += f" — {hint}"
        super().__init__(message)
