"""The outcome of one environment check."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

#: ``ok``: fine; ``warn``: an optional feature is unavailable or something deserves attention;
#: ``missing``: a core requirement is not met (``care doctor`` exits with status 1).
Status = Literal["ok", "warn", "missing"]
STATUSES: tuple[str, ...] = ("ok", "warn", "missing")


@dataclass(frozen=True)
class CheckResult:
    """One row of the doctor's table.

    Attributes:
        check: what was checked (``"python"``, ``"torch"``, ``"extra [e5]"``, ...).
        status: ``ok``, ``warn`` or ``missing``.
        detail: what was found (versions, devices, paths, free space).
        fix: a command or instruction that fixes a ``warn`` / ``missing`` row ("" when ok).
        core: True when the core of care (bench, train, index, serve on CPU) needs it.
    """

    check: str
    status: Status
    detail: str
    fix: str = ""
    core: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"CheckResult.status must be one of {STATUSES}, got {self.status!r}")

    @property
    def blocking(self) -> bool:
        """A core requirement that is missing."""
        return self.core and self.status == "missing"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def core_ok(results: Iterable[CheckResult]) -> bool:
    """True when no core requirement is missing (optional extras only warn)."""
    return not any(r.blocking for r in results)
