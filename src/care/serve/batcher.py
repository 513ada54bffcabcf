"""Micro-batching: concurrent requests share one encoder (and one index) call.

Each request puts its items (texts, or texts with a candidate count) on an asyncio queue with a
*key* — items with the same key can be processed together (same side, same instruction). One
worker takes the first waiting request, keeps collecting for at most ``max_wait`` seconds or until
``max_batch_size`` items are gathered, groups them by key and runs ``process(key, items)`` once per
group in a single worker thread (so the event loop stays free and the model is never called twice
at once: the inline path below runs only while the worker is idle). While the model works, new requests queue up and form the next batch, so
the batch size adapts to the load: 1 when idle, up to ``max_batch_size`` under load.

When the service is idle, the hand-off itself is the cost: a queue, a worker task and a thread hop
cost 0.2-0.5 ms per request on 2 cores, 6-17 % of a 3 ms query (the ``service_load/e5_L6_int8_100k`` record,
settings with and without it side by side). So with
continuous batching (``max_wait`` 0), a request that ``inline`` accepts (small query-side work),
that finds nothing else waiting or running, and that follows a batch of one request (traffic is
sequential, not concurrent) is processed at once on the event loop's thread. The check comes after
one yield to the loop, so requests that arrive together see each other and go through the queue as
one batch. Under concurrent load the worker is busy or its last batch held several requests, so
every request queues: there, running a lone request on the loop would cost a whole model call for
one query while the loop could not read the next requests (measured: fewer q/s at 8 clients).

One bad request never fails the others: when ``process`` raises on a batch of several requests,
each request is processed again alone, so only the request that fails on its own gets the error
(and the others their results, a little later).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from care.errors import CareError

logger = logging.getLogger(__name__)

ProcessFn = Callable[[Hashable, list[Any]], Sequence[Any]]
InlineFn = Callable[[Hashable, list[Any]], bool]


class QueueFullError(CareError):
    """Too many items are waiting; the service answers 503 so that clients back off."""


@dataclass
class _Request:
    key: Hashable
    items: list[Any]
    future: asyncio.Future = field(repr=False)


class MicroBatcher:
    """Collects concurrent requests into batches for ``process``.

    Args:
        process: ``process(key, items) -> results`` (one result per item, same order); runs in a worker
            thread, or for ``inline`` work on the event loop's thread — never two calls at once.
        max_batch_size: most items per ``process`` call (a single larger request is still processed whole).
        max_wait_s: how long to wait for more requests after the first one of a batch.
        max_queue: most items waiting; :meth:`submit` raises :class:`QueueFullError` beyond it.
        on_batch: called with ``(key, n_items, seconds)`` after each ``process`` call (metrics).
        inline: ``inline(key, items)`` is True for work cheap enough to run on the event loop's thread
            when the batcher is idle (module docstring); None = always hand off. Only with ``max_wait_s`` 0.
    """

    def __init__(self, process: ProcessFn, *, max_batch_size: int, max_wait_s: float, max_queue: int,
                 on_batch: Callable[[Hashable, int, float], None] | None = None,
                 inline: InlineFn | None = None) -> None:
        self._process = process
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._on_batch = on_batch
        self._inline = inline if max_wait_s == 0 else None
        self._busy = False
        self._last_batch_requests = 1  # requests in the most recent process() call (inline or worker)
        self.inline_calls = 0
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.pending = 0

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="care-encoder")
        self._worker = asyncio.create_task(self._run(), name="care-micro-batcher")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._worker = self._executor = None

    async def submit(self, key: Hashable, items: list[Any]) -> list[Any]:
        """Queue ``items`` under ``key`` and wait for their results."""
        if self._queue is None:
            raise CareError("the micro-batcher is not running (start() was not awaited)")
        if self.pending + len(items) > self.max_queue:
            raise QueueFullError(f"{self.pending} items are waiting for the encoder (limit {self.max_queue}); retry shortly")
        self.pending += len(items)
        try:
            if self._inline is not None and self._inline(key, items):
                await asyncio.sleep(0)  # let requests that arrived with this one reach submit() too
                if self._idle(len(items)):
                    return self._call_inline(key, list(items))
            future = asyncio.get_running_loop().create_future()
            self._queue.put_nowait(_Request(key, list(items), future))
            return await future
        finally:
            self.pending -= len(items)

    def _idle(self, own_items: int) -> bool:
        """Nothing but the caller's items is waiting, being collected or being processed, and the last
        batch held a single request (sequential traffic)."""
        assert self._queue is not None
        return (not self._busy and self._queue.empty() and self.pending == own_items
                and self._last_batch_requests == 1)

    def _call_inline(self, key: Hashable, items: list[Any]) -> list[Any]:
        """``process(key, items)`` right here on the event loop's thread (the model is idle: see :meth:`_idle`)."""
        self._busy = True
        self._last_batch_requests = 1
        started = time.perf_counter()
        try:
            results = self._process(key, items)
        finally:
            self._busy = False
        self.inline_calls += 1
        return self._checked(key, items, results, time.perf_counter() - started)

    def _checked(self, key: Hashable, items: list[Any], results: Sequence[Any], seconds: float) -> list[Any]:
        """One result per item (else an error); reports the call to ``on_batch``."""
        if len(results) != len(items):
            raise CareError(f"the encoder returned {len(results)} results for {len(items)} inputs")
        if self._on_batch is not None:
            self._on_batch(key, len(items), seconds)
        return list(results)

    async def _collect(self) -> list[_Request]:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        size = len(batch[0].items)
        deadline = loop.time() + self.max_wait_s
        while size < self.max_batch_size:
            try:
                request = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    request = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            batch.append(request)
            size += len(request.items)
        return batch

    async def _call(self, key: Hashable, items: list[Any]) -> list[Any]:
        """``process(key, items)`` in the worker thread; a result count that does not match is an error."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        self._busy = True
        try:
            results = await loop.run_in_executor(self._executor, self._process, key, items)
        finally:
            self._busy = False
        return self._checked(key, items, results, time.perf_counter() - started)

    async def _isolate(self, key: Hashable, requests: list[_Request], error: Exception) -> None:
        """The batch failed: process each request alone, so only the one that fails by itself gets an error."""
        failed = 0
        for request in requests:
            if request.future.done():
                continue
            try:
                results = await self._call(key, request.items)
            except Exception as exc:  # noqa: BLE001 - this request's own error goes to this request only
                failed += 1
                if not request.future.done():
                    request.future.set_exception(exc)
                continue
            if not request.future.done():
                request.future.set_result(results)
        logger.warning("a batch of %d requests failed (%s: %s); each retried alone, %d failed again",
                       len(requests), type(error).__name__, error, failed)

    async def _run(self) -> None:
        while True:
            batch = await self._collect()
            groups: dict[Hashable, list[_Request]] = {}
            for request in batch:
                if not request.future.cancelled():
                    groups.setdefault(request.key, []).append(request)
            if groups:
                self._last_batch_requests = sum(len(requests) for requests in groups.values())
            for key, requests in groups.items():
                items = [item for request in requests for item in request.items]
                try:
                    results = await self._call(key, items)
                except Exception as exc:  # noqa: BLE001
                    if len(requests) > 1:
                        await self._isolate(key, requests, exc)
                    elif not requests[0].future.done():
                        requests[0].future.set_exception(exc)
                    continue
                offset = 0
                for request in requests:
                    n = len(request.items)
                    if not request.future.done():
                        request.future.set_result(results[offset : offset + n])
                    offset += n
