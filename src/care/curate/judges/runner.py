"""Run a :class:`~care.curate.judges.base.Judge` over many pairs: cache first, then bounded
concurrency, each finished call committed to the cache at once (so an interrupted run resumes
where it stopped), a progress bar, and usage accounting."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from tqdm import tqdm

from care.curate.judges.base import Judge, JudgeError, JudgePair, Usage
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
        cache: when given, cached grades are reused and new ones committed call by call.
        concurrency / passages_per_call: override the judge's own settings.
        raise_on_failure: raise :class:`JudgeError` at the end when some calls failed after all
            retries (their pairs stay ungraded; finished grades are already in the cache).
    Returns:
        A :class:`JudgeRunResult`; ``usage`` is what *this* run spent.
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
    committed_usage = start_usage
    bar = tqdm(total=len(todo) + result.cached, initial=result.cached, desc=f"judge {judge.id}", unit="pair",
               disable=not show_progress)

    def finish(batch: list[JudgePair], future: Future[list[str]]) -> None:
        nonlocal committed_usage
        try:
            grades = future.result()
        except JudgeError as exc:
            result.failed.extend((p.query_id, p.doc_id) for p in batch)
            result.errors.append(str(exc))
            logger.warning("%s", exc)
            bar.update(len(batch))
            return
        now = judge.usage()
        if cache is not None:
            cache.put_many(judge.id, fingerprint, [(p.query, p.passage, g) for p, g in zip(batch, grades)],
                           now.minus(committed_usage))
        committed_usage = now
        for p, g in zip(batch, grades):
            result.grades[(p.query_id, p.doc_id)] = g
        result.judged += len(batch)
        bar.update(len(batch))

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"judge-{judge.id}") as pool:
        running: dict[Future[list[str]], list[JudgePair]] = {}
        for batch in _calls(todo, per_call):
            if len(running) >= concurrency * QUEUE_FACTOR:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    finish(running.pop(fut), fut)
            running[pool.submit(judge.judge, batch[0].query, [p.passage for p in batch])] = batch
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                finish(running.pop(fut), fut)
    bar.close()
    result.usage = judge.usage().minus(start_usage)
    if result.failed and raise_on_failure:
        raise JudgeError(f"judge {judge.id!r}: {len(result.failed)} pair(s) could not be judged "
                         f"({result.errors[0]}); finished grades are cached — rerun to retry the rest")
    return result
