"""Fair asyncio: every response handed out by ``AsyncResponseIterator``
lets the event loop run its other tasks first, even when the response was
already queued (single responses and streams alike), so coroutines sharing a
fast model each get their share and no task starves."""

from __future__ import annotations

import asyncio
import queue
import time

import numpy
import pytest

from tritonserver import InferenceResponse
from common import as_numpy, call_with_deadline, hooks, wait_for

HANG_S = 60  # a generous deadline: only there so a bug cannot hang the suite
INPUTS = {"INPUT0": numpy.ones(16, dtype=numpy.float32)}


class Spinner:
    """A task that counts its own turns on the loop: a caller that reads
    `turns` before and after an await sees whether the loop ran it."""

    def __init__(self) -> None:
        self.turns = 0
        self.stopped = False

    async def run(self) -> None:
        while not self.stopped:
            self.turns += 1
            await asyncio.sleep(0)


def test_queued_response_still_yields_to_the_loop(model):
    identity = model("identity_fp32")

    async def main() -> list[int]:
        spinner = Spinner()
        task = asyncio.create_task(spinner.run())
        await asyncio.sleep(0)
        missed = []
        for i in range(20):
            iterator = identity.async_infer(inputs=INPUTS)
            # Block the loop while the response arrives: __anext__ then finds
            # it queued.
            assert wait_for(lambda: hooks().response_queued(iterator), HANG_S)
            before = spinner.turns
            response = await iterator.__anext__()
            assert response.final
            if spinner.turns == before:
                missed.append(i)
        spinner.stopped = True
        await task
        return missed

    assert asyncio.run(asyncio.wait_for(main(), HANG_S)) == []


def test_task_cancelled_during_its_turn_leaves_the_response_queued(model):
    identity = model("identity_fp32")

    async def main() -> None:
        iterator = identity.async_infer(inputs=INPUTS)
        assert wait_for(lambda: hooks().response_queued(iterator), HANG_S)
        task = asyncio.ensure_future(iterator.__anext__())
        await asyncio.sleep(0)  # the task starts and gives up its turn
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        response = await asyncio.wait_for(iterator.__anext__(), HANG_S)
        assert response.final and response.error is None
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == INPUTS["INPUT0"].tolist()
        with pytest.raises(StopAsyncIteration):
            await iterator.__anext__()

    asyncio.run(asyncio.wait_for(main(), HANG_S))


def test_queued_response_awaitable_by_hand(model):
    # The awaitable __anext__ returns, driven through the iterator protocol
    # (CPython 3.12+ resumes an await with tp_iternext, 3.10-3.11 with
    # am_send): for a queued response one bare yield, then StopIteration
    # carrying the InferenceResponse.
    identity = model("identity_fp32")

    async def main() -> None:
        iterator = identity.async_infer(inputs=INPUTS)
        assert wait_for(lambda: hooks().response_queued(iterator), HANG_S)
        awaitable = iterator.__anext__()
        steps = awaitable.__await__()
        assert steps is awaitable and iter(steps) is steps
        assert next(steps) is None  # queued: one bare yield
        with pytest.raises(StopIteration) as stop:
            next(steps)
        response = stop.value.value
        assert isinstance(response, InferenceResponse) and response.final
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == INPUTS["INPUT0"].tolist()
        with pytest.raises(StopAsyncIteration):
            iterator.__anext__()  # raised by __anext__ itself: nothing to await

    asyncio.run(asyncio.wait_for(main(), HANG_S))


def test_next_response_is_a_coroutine_for_asyncio(model):
    # __anext__() can be given to asyncio.create_task, as an `async def`
    # __anext__ could (the official binding's), and a task cancelled while
    # it waits leaves the iterator usable.
    streaming = model("streaming")

    async def main() -> tuple[list[int], list[int]]:
        iterator = streaming.async_infer(
            inputs={"COUNT": numpy.array([3], dtype=numpy.int32),
                    "DELAY_MS": numpy.array([50], dtype=numpy.int32)})
        assert asyncio.iscoroutine(iterator.__anext__())  # dropped unawaited: nothing waits
        first = await asyncio.create_task(iterator.__anext__())
        waiting = asyncio.create_task(iterator.__anext__())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        rest = [r async for r in iterator]
        return ([as_numpy(first.outputs["OUT"]).item()],
                [as_numpy(r.outputs["OUT"]).item() for r in rest if r.outputs])

    first, rest = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert first == [0]
    assert rest == [1, 2]


def test_queued_stream_yields_before_every_response(model):
    side: queue.SimpleQueue = queue.SimpleQueue()
    count = 30

    def wait_for_final() -> None:
        while not side.get(timeout=HANG_S).final:
            pass

    async def main() -> tuple[int, list[int]]:
        spinner = Spinner()
        task = asyncio.create_task(spinner.run())
        iterator = model("streaming").async_infer(
            inputs={"COUNT": numpy.array([count], dtype=numpy.int32)}, response_queue=side)
        await asyncio.get_running_loop().run_in_executor(None, wait_for_final)
        received, missed = 0, []
        before = spinner.turns
        async for _ in iterator:  # every response already queued
            if spinner.turns == before:
                missed.append(received)
            received += 1
            before = spinner.turns
        spinner.stopped = True
        await task
        return received, missed

    received, missed = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert received == count + 1  # the responses and the final one
    assert missed == []


def test_coroutines_sharing_a_fast_model_get_fair_shares(model):
    identity = model("identity_fp32")
    workers, total = 8, 8 * 600

    async def main() -> tuple[list[int], float]:
        completed = [0] * workers
        done = 0
        longest_gap = 0.0
        finished = False

        async def worker(index: int) -> None:
            nonlocal done
            while done < total:
                async for _ in identity.async_infer(inputs=INPUTS):
                    pass
                completed[index] += 1
                done += 1

        async def ticker() -> None:
            nonlocal longest_gap
            last = time.monotonic()
            while not finished:
                await asyncio.sleep(0.001)
                now = time.monotonic()
                longest_gap = max(longest_gap, now - last)
                last = now

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        await asyncio.gather(*(worker(i) for i in range(workers)))
        finished = True
        await tick
        return completed, longest_gap

    completed, longest_gap = call_with_deadline(lambda: asyncio.run(main()), HANG_S)
    share = sum(completed) / workers
    assert all(0.5 * share <= c <= 1.5 * share for c in completed), (completed, share)
    # Hang-catching only (a starved ticker would wait for the whole run).
    assert longest_gap < 1.0, longest_gap
