"""The micro-batcher: concurrent submissions share one process() call per key; errors and back-pressure."""

from __future__ import annotations

import asyncio
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
