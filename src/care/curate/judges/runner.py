"""Run a :class:`~care.curate.judges.base.Judge` over many pairs: cache first, then bounded
concurrency, each finished call committed to the cache at once (so an interrupted run resumes
where it stopped), every request's usage recorded as it happens, a progress bar, and usage
accounting."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from tqdm import tqdm

from care.curate.judges.base import Judge, JudgeError, JudgePair, Usage, usage_meter
from care.curate.judges.cache import JudgmentCache

logger = logging.getLogger(__name__)

#: How many calls may be queued beyond the running ones (keeps memory flat on huge inputs).
QUEUE_FACTOR = 2


@dataclass
class JudgeRunResult:
    """Grades by ``(query_id, doc_id)`` plus what the run cost."""

    grades: dict[tuple[str, str], str] = field(default_factory=dict)
    cached: int = 0
    judged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)


def _calls(pairs: Iterable[JudgePair], per_call: int) -> Iterator[list[JudgePair]]:
    """Group consecutive pairs of the same query into calls of at most ``per_call`` passages."""
    batch: list[JudgePair] = []
    for pair in pairs:
        if batch and (pair.query != batch[0].query or len(batch) >= per_call):
            yield batch
            batch = []
        batch.append(pair)
    if batch:
        yield batch


def _dedupe(pairs: Iterable[JudgePair]) -> list[JudgePair]:
    seen: OrderedDict[tuple[str, str], JudgePair] = OrderedDict()
    for p in pairs:
        seen.setdefault((p.query_id, p.doc_id), p)
    # group a query's passages together so one call carries several of them
    by_query: OrderedDict[str, list[JudgePair]] = OrderedDict()
    for p in seen.values():
        by_query.setdefault(p.query, []).append(p)
    return [p for group in by_query.values() for p in group]


@dataclass
class _CallOutcome:
    """What one judge call gave: a grade (or None) per pair, and the error when some are missing."""

    grades: list[str | None]
    error: JudgeError | None = None


def judge_pairs(
    judge: Judge,
    pairs: Iterable[JudgePair],
    cache: JudgmentCache | None = None,
    *,
    concurrency: int | None = None,
    passages_per_call: int | None = None,
    show_progress: bool = True,
    raise_on_failure: bool = True,
) -> JudgeRunResult:
    """Grade every pair once.

    Args:
        judge: any Judge.
        pairs: pairs to grade (duplicates by ids are graded once).
        cache: when given, cached grades are reused; each call's grades are committed the moment the
            call returns (in its worker thread), and — for judges with a usage meter — every
            request's usage the moment it is sent or answered, so a killed run has paid for nothing
            it does not remember. When a call grades only some of its passages, those grades are kept
            and only the rest count as failed (a rerun asks for them alone).
        concurrency / passages_per_call: override the judge's own settings.
        raise_on_failure: raise :class:`JudgeError` at the end when some pairs are still ungraded
            after all retries (finished grades are already in the cache).
    Returns:
        A :class:`JudgeRunResult`; ``usage`` is what *this* run spent (the cache holds the totals).
    """
    concurrency = concurrency or judge.max_concurrency
    per_call = passages_per_call or judge.passages_per_call
    todo = _dedupe(pairs)
    result = JudgeRunResult()
    fingerprint = judge.fingerprint
    if cache is not None:
        hits = cache.get_many(judge.id, fingerprint, [(p.query, p.passage) for p in todo])
        remaining = []
        for p in todo:
            grade = hits.get((p.query, p.passage))
            if grade is None:
                remaining.append(p)
            else:
                result.grades[(p.query_id, p.doc_id)] = grade
        result.cached = len(todo) - len(remaining)
        todo = remaining
    start_usage = judge.usage()
    meter = usage_meter(judge)
    live_usage = cache is not None and meter is not None

    def record_usage(increment: Usage) -> None:
        assert cache is not None
        cache.add_usage(judge.id, increment)

    if live_usage:
        meter.subscribe(record_usage)  # type: ignore[union-attr]
    committed_usage = start_usage
    bar = tqdm(total=len(todo) + result.cached, initial=result.cached, desc=f"judge {judge.id}", unit="pair",
               disable=not show_progress)

    def call(batch: list[JudgePair]) -> _CallOutcome:
        """Runs in a worker thread: one judge call, its grades committed before it returns."""
        nonlocal committed_usage
        try:
            outcome = _CallOutcome(list(judge.judge(batch[0].query, [p.passage for p in batch])))
        except JudgeError as exc:
            outcome = _CallOutcome(list(exc.grades) if exc.grades else [None] * len(batch), exc)
        if len(outcome.grades) != len(batch):
            outcome = _CallOutcome([None] * len(batch), JudgeError(
                f"judge {judge.id!r} returned {len(outcome.grades)} grade(s) for {len(batch)} passage(s)"))
        if cache is not None:
            rows = [(p.query, p.passage, g) for p, g in zip(batch, outcome.grades) if g is not None]
            usage = None
            if not live_usage:
                with usage_lock:
                    now = judge.usage()
                    usage, committed_usage = now.minus(committed_usage), now
            if rows or usage is not None:
                cache.put_many(judge.id, fingerprint, rows, usage)
        return outcome

    def finish(batch: list[JudgePair], future: Future[_CallOutcome]) -> None:
        outcome = future.result()
        for p, g in zip(batch, outcome.grades):
            if g is None:
                result.failed.append((p.query_id, p.doc_id))
            else:
                result.grades[(p.query_id, p.doc_id)] = g
                result.judged += 1
        if outcome.error is not None:
            result.errors.append(str(outcome.error))
            kept = sum(g is not None for g in outcome.grades)
            logger.warning("%s%s", outcome.error, f" (kept the {kept} grade(s) that came back)" if kept else "")
        bar.update(len(batch))

    usage_lock = threading.Lock()
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"judge-{judge.id}") as pool:
            running: dict[Future[_CallOutcome], list[JudgePair]] = {}
            for batch in _calls(todo, per_call):
                if len(running) >= concurrency * QUEUE_FACTOR:
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        finish(running.pop(fut), fut)
                running[pool.submit(call, batch)] = batch
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    finish(running.pop(fut), fut)
    finally:
        if live_usage:
            meter.unsubscribe(record_usage)  # type: ignore[union-attr]
        bar.close()
    result.usage = judge.usage().minus(start_usage)
    if result.failed and raise_on_failure:
        raise JudgeError(f"judge {judge.id!r}: {len(result.failed)} pair(s) could not be judged "
                         f"({result.errors[0]}); finished grades are cached — rerun to retry the rest")
    return result
