"""The micro-batcher: concurrent submissions share one process() call per key; errors and back-pressure."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from care.serve.batcher import MicroBatcher, QueueFullError


def _run(coro):
    return asyncio.run(coro)


def test_concurrent_requests_form_one_batch_per_key():
    calls: list[tuple[object, list[str]]] = []

    def process(key, items):
        calls.append((key, list(items)))
        return [f"{key}:{item}" for item in items]

    async def main():
        batcher = MicroBatcher(process, max_batch_size=64, max_wait_s=0.05, max_queue=100)
        await batcher.start()
        try:
            results = await asyncio.gather(
                batcher.submit("a", ["1", "2"]), batcher.submit("b", ["3"]), batcher.submit("a", ["4"]),
            )
        finally:
            await batcher.stop()
        return results

    results = _run(main())
    assert results == [["a:1", "a:2"], ["b:3"], ["a:4"]]
    assert sorted(calls, key=lambda c: str(c[0])) == [("a", ["1", "2", "4"]), ("b", ["3"])]


def test_batches_are_capped_at_max_batch_size():
    sizes: list[int] = []

    def process(key, items):
        sizes.append(len(items))
        return items

    async def main():
        batcher = MicroBatcher(process, max_batch_size=4, max_wait_s=0.05, max_queue=100)
        await batcher.start()
        try:
            await asyncio.gather(*(batcher.submit("k", [i]) for i in range(10)))
        finally:
            await batcher.stop()

    _run(main())
    assert sum(sizes) == 10 and max(sizes) <= 4


def test_process_errors_reach_every_waiting_request():
    def process(key, items):
        raise ValueError("model exploded")

    async def main():
        batcher = MicroBatcher(process, max_batch_size=8, max_wait_s=0.01, max_queue=100)
        await batcher.start()
        try:
            return await asyncio.gather(batcher.submit("k", [1]), batcher.submit("k", [2]), return_exceptions=True)
        finally:
            await batcher.stop()

    errors = _run(main())
    assert all(isinstance(e, ValueError) and "exploded" in str(e) for e in errors)


def test_a_full_queue_rejects_new_work():
    release = threading.Event()

    def process(key, items):
        release.wait(5)
        return items

    async def main():
        batcher = MicroBatcher(process, max_batch_size=1, max_wait_s=0, max_queue=2)
        await batcher.start()
        try:
            first = asyncio.create_task(batcher.submit("k", [1, 2]))
            await asyncio.sleep(0.05)
            with pytest.raises(QueueFullError, match="limit 2"):
                await batcher.submit("k", [3])
            release.set()
            return await first
        finally:
            release.set()
            await batcher.stop()

    assert _run(main()) == [1, 2]


def test_a_failing_request_is_isolated_and_the_others_succeed():
    calls: list[list[str]] = []

    def process(key, items):  # like a tokenizer that chokes on one input
        calls.append(list(items))
        if "bad" in items:
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return [item.upper() for item in items]

    async def main():
        batcher = MicroBatcher(process, max_batch_size=8, max_wait_s=0.05, max_queue=100)
        await batcher.start()
        try:
            return await asyncio.gather(batcher.submit("k", ["a"]), batcher.submit("k", ["bad"]),
                                        batcher.submit("k", ["b", "c"]), return_exceptions=True)
        finally:
            await batcher.stop()

    first, second, third = _run(main())
    assert first == ["A"] and third == ["B", "C"]
    assert isinstance(second, UnicodeEncodeError)
    assert calls == [["a", "bad", "b", "c"], ["a"], ["bad"], ["b", "c"]]  # the batch, then each request alone


@contextlib.asynccontextmanager
async def _always_inline(calls: list, threads: list):
    """A started batcher (continuous batching) whose ``inline`` accepts all work, recording its calls."""
    batcher = MicroBatcher(_recording_process(calls, threads), max_batch_size=8, max_wait_s=0, max_queue=100,
                           inline=lambda key, items: True)
    await batcher.start()
    try:
        yield batcher
    finally:
        await batcher.stop()


def _recording_process(calls: list, threads: list):
    def process(key, items):
        calls.append((key, list(items)))
        threads.append(threading.get_ident())
        return [f"{key}:{item}" for item in items]
    return process


def test_an_idle_batcher_runs_accepted_work_inline_on_the_loop_thread():
    calls, threads, batches = [], [], []

    async def main():
        batcher = MicroBatcher(_recording_process(calls, threads), max_batch_size=8, max_wait_s=0, max_queue=100,
                               on_batch=lambda key, n, seconds: batches.append((key, n)),
                               inline=lambda key, items: key == "q")
        await batcher.start()
        try:
            first = await batcher.submit("q", ["1"])
            second = await batcher.submit("d", ["2"])  # not accepted by ``inline``: the worker thread
        finally:
            await batcher.stop()
        return first, second, batcher.inline_calls, batcher.pending

    first, second, inline_calls, pending = _run(main())
    assert (first, second) == (["q:1"], ["d:2"])
    assert inline_calls == 1 and pending == 0
    assert threads[0] == threading.get_ident() and threads[1] != threading.get_ident()
    assert batches == [("q", 1), ("d", 1)]  # both reported to the metrics


def test_requests_arriving_together_still_form_one_batch_when_inline_is_on():
    calls, threads = [], []

    async def main():
        async with _always_inline(calls, threads) as batcher:
            results = await asyncio.gather(*(batcher.submit("q", [str(i)]) for i in range(4)))
        return results, batcher.inline_calls

    results, inline_calls = _run(main())
    assert results == [[f"q:{i}"] for i in range(4)]
    assert inline_calls == 0
    assert calls == [("q", ["0", "1", "2", "3"])]
    assert all(t != threading.get_ident() for t in threads)


def test_after_a_concurrent_batch_the_next_lone_request_goes_through_the_worker_then_inline():
    calls, threads = [], []

    async def main():
        async with _always_inline(calls, threads) as batcher:
            await asyncio.gather(*(batcher.submit("q", [str(i)]) for i in range(3)))  # concurrent: one batch
            after_concurrent = await batcher.submit("q", ["a"])  # traffic may still be concurrent: the worker
            inline_before = batcher.inline_calls
            sequential = await batcher.submit("q", ["b"])  # the last batch was one request: inline
        return after_concurrent, sequential, inline_before, batcher.inline_calls

    assert _run(main()) == (["q:a"], ["q:b"], 0, 1)
    loop_thread = threads[-1]
    assert threads[-2] != loop_thread and threads[0] != loop_thread


def test_a_request_never_runs_inline_while_the_worker_is_busy():
    release = threading.Event()
    threads: list[int] = []

    def process(key, items):
        threads.append(threading.get_ident())
        if items == ["slow"]:
            release.wait(5)
        return list(items)

    async def main():
        batcher = MicroBatcher(process, max_batch_size=8, max_wait_s=0, max_queue=100,
                               inline=lambda key, items: items != ["slow"])
        await batcher.start()
        try:
            slow = asyncio.create_task(batcher.submit("q", ["slow"]))
            while not threads:  # the worker thread has the slow item
                await asyncio.sleep(0.001)
            fast = asyncio.create_task(batcher.submit("q", ["fast"]))
            await asyncio.sleep(0.05)
            assert not fast.done()  # queued behind the model, not run beside it
            release.set()
            return await slow, await fast, batcher.inline_calls
        finally:
            await batcher.stop()

    slow, fast, inline_calls = _run(main())
    assert (slow, fast, inline_calls) == (["slow"], ["fast"], 0)
    assert threading.get_ident() not in threads


def test_inline_errors_reach_only_their_request_and_a_waiting_batch_disables_inline():
    def process(key, items):
        if "bad" in items:
            raise ValueError("bad input")
        return list(items)

    async def main():
        batcher = MicroBatcher(process, max_batch_size=8, max_wait_s=0.05, max_queue=100, inline=lambda key, items: True)
        await batcher.start()
        try:
            ok = await batcher.submit("q", ["ok"])  # max_wait > 0: the batcher keeps its wait, never inline
            inline_calls = batcher.inline_calls
        finally:
            await batcher.stop()
        batcher = MicroBatcher(process, max_batch_size=8, max_wait_s=0, max_queue=100, inline=lambda key, items: True)
        await batcher.start()
        try:
            with pytest.raises(ValueError, match="bad input"):
                await batcher.submit("q", ["bad"])
            after = await batcher.submit("q", ["fine"])
            return ok, inline_calls, after, batcher.inline_calls, batcher.pending
        finally:
            await batcher.stop()

    assert _run(main()) == (["ok"], 0, ["fine"], 1, 0)
