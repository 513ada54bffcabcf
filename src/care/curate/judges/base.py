"""The :class:`Judge` protocol: grade (query, passage) pairs on the paper's five-level scale.

Grades, best first: ``S`` (fully relevant), ``A`` (highly), ``B`` (partly), ``C`` (weakly),
``D`` (irrelevant). How grades become labels is the voting step's business
(:mod:`care.curate.judges.voting`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from care.errors import CareError

GRADES: tuple[str, ...] = ("S", "A", "B", "C", "D")


class JudgeError(CareError):
    """A judge could not grade some passages (API errors after all retries, unparseable replies).

    Attributes:
        grades: when the judge graded *some* passages of the call, one entry per passage in order —
            the grade, or None for a passage it could not grade — so the caller keeps what came back
            and asks again only for the rest; None when nothing was graded.
    """

    def __init__(self, message: str, *, grades: Sequence[str | None] | None = None) -> None:
        super().__init__(message)
        self.grades = list(grades) if grades is not None and any(g is not None for g in grades) else None


@dataclass(frozen=True)
class JudgePair:
    """One (query, passage) pair to grade, with the ids used in output files."""

    query_id: str
    query: str
    doc_id: str
    passage: str


@dataclass
class Usage:
    """Requests, replies, retries, tokens and cost spent by a judge (cumulative).

    Attributes:
        sent: requests sent to the API (counted *before* each is sent).
        calls: replies received (their tokens and cost are counted).
        retries: failed attempts that were tried again (timeouts, 429, 5xx, connection errors).
        errors: failed attempts that were not tried again (retries exhausted, 4xx).
        reasks: follow-up requests for passages a reply left out.
        prompt_tokens / completion_tokens / cost_usd: from the replies' ``usage``.
    """

    calls: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    sent: int = 0
    errors: int = 0

    @property
    def unrecorded(self) -> int:
        """Requests sent whose outcome never came back (in flight, or lost when the process was killed).

        A paid API has usually charged them; their tokens are unknown."""
        return max(0, self.sent - self.calls - self.retries - self.errors)

    def minus(self, other: Usage) -> Usage:
        return Usage(**{k: v - getattr(other, k) for k, v in asdict(self).items()})

    def plus(self, other: Usage) -> Usage:
        return Usage(**{k: v + getattr(other, k) for k, v in asdict(self).items()})

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


UsageListener = Callable[[Usage], None]


class UsageMeter:
    """Thread-safe accumulator of :class:`Usage`; listeners see every increment as it happens.

    A listener (e.g. the judgment cache, which writes it to disk at once) is called with the
    increment as a :class:`Usage`, in the thread that recorded it, so usage survives a kill -9 the
    moment a reply returns.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage = Usage()
        self._listeners: list[UsageListener] = []

    def subscribe(self, listener: UsageListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: UsageListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def add(self, **delta: float) -> None:
        with self._lock:
            for key, value in delta.items():
                setattr(self._usage, key, getattr(self._usage, key) + value)
            listeners = list(self._listeners)
        if listeners:
            increment = Usage(**delta)  # type: ignore[arg-type]
            for listener in listeners:
                listener(increment)

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


def usage_meter(judge: Judge) -> UsageMeter | None:
    """The judge's :class:`UsageMeter` when it exposes one as ``meter`` (the built-in judges do), so a
    runner can record each request's usage as it happens; None for judges that only report ``usage()``."""
    meter = getattr(judge, "meter", None)
    return meter if isinstance(meter, UsageMeter) else None
