"""The :class:`Judge` protocol: grade (query, passage) pairs on the paper's five-level scale.

Grades, best first: ``S`` (fully relevant), ``A`` (highly), ``B`` (partly), ``C`` (weakly),
``D`` (irrelevant). How grades become labels is the voting step's business
(:mod:`care.curate.voting`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from care.errors import CareError

GRADES: tuple[str, ...] = ("S", "A", "B", "C", "D")


class JudgeError(CareError):
    """A judge could not grade some passages (API errors after all retries, unparseable replies)."""


@dataclass(frozen=True)
class JudgePair:
    """One (query, passage) pair to grade, with the ids used in output files."""

    query_id: str
    query: str
    doc_id: str
    passage: str


@dataclass
class Usage:
    """Calls, retries, tokens and cost spent by a judge (cumulative)."""

    calls: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def minus(self, other: Usage) -> Usage:
        return Usage(**{k: v - getattr(other, k) for k, v in asdict(self).items()})

    def plus(self, other: Usage) -> Usage:
        return Usage(**{k: v + getattr(other, k) for k, v in asdict(self).items()})

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


class UsageMeter:
    """Thread-safe accumulator of :class:`Usage`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage = Usage()

    def add(self, **delta: float) -> None:
        with self._lock:
            for key, value in delta.items():
                setattr(self._usage, key, getattr(self._usage, key) + value)

    def snapshot(self) -> Usage:
        with self._lock:
            return Usage(**asdict(self._usage))


@runtime_checkable
class Judge(Protocol):
    """Grades passages for one query.

    Attributes:
        id: stable name of the judge (part of the cache key; change it when the model changes).
        fingerprint: hash of everything else the grades depend on (prompt template, thresholds);
            part of the cache key.
        passages_per_call: how many passages the runner sends in one :meth:`judge` call.
        max_concurrency: how many :meth:`judge` calls may run at once.
    """

    id: str
    passages_per_call: int
    max_concurrency: int

    @property
    def fingerprint(self) -> str: ...

    def judge(self, query: str, passages: Sequence[str]) -> list[str]:
        """Return one grade from :data:`GRADES` per passage, in order (raise :class:`JudgeError`)."""
        ...

    def usage(self) -> Usage:
        """Cumulative calls / tokens / cost of this judge object."""
        ...
