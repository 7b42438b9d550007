"""The per-request response queue and the native asyncio waiters: streams
queued before anyone iterates (the inline slot and its overflow), a
cancelled await, many loops, and the Triton type read from a NumPy buffer's
format."""

from __future__ import annotations

import asyncio
import gc
import queue

import numpy
import pytest

from tritonserver import CancelledError, _native
from tritonserver._api import _asyncio_waiters
from common import as_numpy, call_with_deadline, hooks, run_loops_in_threads, streaming_inputs, until

HANG_S = 60  # a generous deadline: only there so a bug cannot hang the suite


def _wait_for_final(user_queue: "queue.SimpleQueue") -> int:
    """Take a stream's responses off a user queue up to the final one; by
    then (nearly) all of them also sit in the request's own queue."""
    count = 0
    while True:
        response = user_queue.get(timeout=HANG_S)
        count += 1
        if response.final:
            return count


def _values(responses) -> list[int]:
    return [as_numpy(r.outputs["OUT"]).tolist()[0] for r in responses if not r.final]


def test_stream_queued_before_iteration_arrives_whole_and_in_order(model):
    # 41 responses queued before the first is taken: the first in the inline
    # slot, the rest in the overflow queue, all in order.
    side = queue.SimpleQueue()
    iterator = model("streaming").infer(inputs=streaming_inputs(40), response_queue=side)
    assert call_with_deadline(lambda: _wait_for_final(side)) == 41
    responses = call_with_deadline(lambda: list(iterator))
    assert [r.final for r in responses] == [False] * 40 + [True]
    assert _values(responses) == list(range(40))


def test_stream_queued_before_async_iteration_needs_no_future(model):
    side = queue.SimpleQueue()

    async def main():
        iterator = model("streaming").async_infer(inputs=streaming_inputs(30), response_queue=side)
        await asyncio.get_running_loop().run_in_executor(None, _wait_for_final, side)
        responses = [r async for r in iterator]
        return responses, hooks().asyncio_waiting(_asyncio_waiters.for_loop(asyncio.get_running_loop()))

    responses, waiting = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert [r.final for r in responses] == [False] * 30 + [True]
    assert _values(responses) == list(range(30))
    assert waiting == 0


def test_stream_consumed_slower_than_produced_stays_in_order(model):
    async def main():
        received = []
        async for response in model("streaming").async_infer(inputs=streaming_inputs(20, delay_ms=1)):
            received.append(response)
            if len(received) % 5 == 0:
                await asyncio.sleep(0.02)  # let several responses queue up
        return received

    received = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert [r.final for r in received] == [False] * 20 + [True]
    assert _values(received) == list(range(20))


def test_requests_of_one_instance_reach_their_tasks_in_the_order_they_finish(model):
    """Tasks each awaiting one request of a one-instance model (which
    finishes them in the order submitted) get their responses in that
    order: a task that finds its response already queued waits behind the
    tasks whose responses came first and whose wake-up the loop has not
    read yet (a gRPC stream's answers are written in this order)."""
    identity = model("identity_fp32")
    count = 400

    async def main():
        finished: list[int] = []

        async def one(i):
            async for response in identity.async_infer(inputs={"INPUT0": numpy.full(4, i, numpy.float32)}):
                if response.final:
                    finished.append(int(as_numpy(response.outputs["OUTPUT0"])[0]))

        await asyncio.gather(*(one(i) for i in range(count)))
        return finished

    for _ in range(3):
        assert asyncio.run(asyncio.wait_for(main(), HANG_S)) == list(range(count))


def test_cancelled_await_forgets_its_future(model):
    async def main():
        loop = asyncio.get_running_loop()
        iterator = model("streaming").async_infer(inputs=streaming_inputs(2, delay_ms=2000), raise_on_error=False)
        first = [r async for r in _take(iterator, 1)]
        waiters = _asyncio_waiters.for_loop(loop)
        task = asyncio.ensure_future(iterator.__anext__())  # waits ~2 s for the second
        await until(lambda: hooks().asyncio_waiting(waiters) == 1)
        # The garbage collector sees the future the waiters hold.
        assert any(isinstance(o, asyncio.Future) for o in gc.get_referents(waiters))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        forgotten = hooks().asyncio_waiting(waiters) == 0
        # The stream still ends: cancel it in Triton and drain it.
        iterator.cancel()
        rest = [r async for r in iterator]
        return first, forgotten, rest

    first, forgotten, rest = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert _values(first) == [0]
    assert forgotten
    assert rest and rest[-1].final
    assert all(r.error is None or isinstance(r.error, CancelledError) for r in rest)


def test_dropped_awaitable_forgets_its_future(model):
    # An __anext__() awaitable resumed once (it then waits on the loop's
    # future) and dropped without being awaited again: the waiters let the
    # future go, and the iterator goes on from another await.
    async def main():
        loop = asyncio.get_running_loop()
        iterator = model("streaming").async_infer(inputs=streaming_inputs(2, delay_ms=300))
        waiters = _asyncio_waiters.for_loop(loop)
        first = await iterator.__anext__()  # the second comes 300 ms later
        awaitable = iterator.__anext__()
        assert hooks().asyncio_waiting(waiters) == 0  # nothing happens before it is resumed
        future = awaitable.__await__().send(None)
        assert isinstance(future, asyncio.Future) and hooks().asyncio_waiting(waiters) == 1
        del awaitable
        forgotten = hooks().asyncio_waiting(waiters) == 0
        rest = [r async for r in iterator]
        return forgotten, [first, *rest]

    forgotten, responses = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert forgotten
    assert _values(responses) == [0, 1] and responses[-1].final


async def _take(iterator, n):
    for _ in range(n):
        yield await iterator.__anext__()


def test_many_loops_each_with_its_waiters(model):
    m = model("streaming")

    async def one():
        return _values([r async for r in m.async_infer(inputs=streaming_inputs(10, delay_ms=1))])

    async def main(t):
        waiters = _asyncio_waiters.for_loop(asyncio.get_running_loop())
        streams = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(8))), HANG_S)
        return streams, hooks().asyncio_waiting(waiters)

    results = run_loops_in_threads(main, 6, HANG_S)
    for streams, waiting in results.values():
        assert streams == [list(range(10))] * 8
        assert waiting == 0


@pytest.mark.parametrize("dtype", ["?", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8"])
def test_host_array_taken_with_its_triton_type(server, model, dtype):
    model("identity_fp32")
    request = _native.Request(server._started(), "identity_fp32", -1)
    try:
        assert request.add_host_array("X", numpy.zeros((2, 3), dtype=dtype))
    finally:
        request.discard()


@pytest.mark.parametrize("array", [
    numpy.zeros(4, dtype=">f4"),  # byte-swapped
    numpy.zeros(4, dtype="c8"),  # no Triton type
    numpy.zeros(4, dtype="U3"),
    numpy.zeros(4, dtype=object),
    numpy.zeros((4, 4), dtype="f4")[:, 1],  # not contiguous
    numpy.zeros(4, dtype=[("a", "f4"), ("b", "i4")]),
], ids=["byteswapped", "complex", "unicode", "object", "strided", "struct"])
def test_host_array_declined_for_the_general_path(server, model, array):
    model("identity_fp32")
    request = _native.Request(server._started(), "identity_fp32", -1)
    try:
        assert not request.add_host_array("X", array)
    finally:
        request.discard()


def test_a_loop_with_its_own_create_future_makes_the_futures(model):
    # asyncio's own loops get Future(loop=loop) made natively; a loop that
    # overrides create_future() (as uvloop does) is asked for each future.
    made = []

    class CountingLoop(asyncio.SelectorEventLoop):
        def create_future(self):
            future = super().create_future()
            made.append(future)
            return future

    async def main():
        stream = model("streaming").async_infer(inputs=streaming_inputs(3, delay_ms=20))
        return [r async for r in stream]

    loop = CountingLoop()
    try:
        # No wait_for: it would make futures of its own.
        responses = loop.run_until_complete(main())
    finally:
        loop.close()
    assert _values(responses) == [0, 1, 2]
    assert made and all(f.done() for f in made)


def test_two_tasks_on_one_async_iterator(model):
    # The second concurrent __anext__ is refused (ValueError); the first
    # still gets the response, and the iterator then ends normally.
    async def main():
        iterator = model("sleep").async_infer(inputs={"SECONDS": numpy.array([0.3], dtype=numpy.float32)})
        first = asyncio.ensure_future(iterator.__anext__())
        waiters = _asyncio_waiters.for_loop(asyncio.get_running_loop())
        await until(lambda: hooks().asyncio_waiting(waiters) == 1)  # first awaits its future
        with pytest.raises(ValueError, match="one task at a time"):
            await iterator.__anext__()
        response = await asyncio.wait_for(first, HANG_S)
        assert response.final and as_numpy(response.outputs["OUT"]).tolist() == [pytest.approx(0.3)]
        with pytest.raises(StopAsyncIteration):
            await iterator.__anext__()

    asyncio.run(main())


@pytest.mark.parametrize("delay_ms", [0, 200], ids=["queued", "awaited"])
def test_iterator_awaited_in_another_loop_is_refused_naming_the_rule(model, delay_ms):
    # An iterator's wake-ups reach the loop async_infer() ran in. Awaited in
    # another loop it failed with asyncio's "Task ... got Future ...
    # attached to a different loop" (no response queued yet) or took a
    # queued response in passing; both are now refused with one message,
    # and the iterator still serves its own loop.
    first_loop = asyncio.new_event_loop()
    try:
        async def start():
            return model("streaming").async_infer(inputs=streaming_inputs(2, delay_ms=delay_ms))

        iterator = first_loop.run_until_complete(start())

        async def take_one():
            return await iterator.__anext__()

        with pytest.raises(RuntimeError, match=r"this AsyncResponseIterator is awaited in another event loop than "
                                               r"the one async_infer\(\) ran in: .* iterate it there, or call "
                                               r"async_infer\(\) in this loop"):
            asyncio.run(asyncio.wait_for(take_one(), HANG_S))

        async def rest():
            return [r async for r in iterator]

        responses = first_loop.run_until_complete(asyncio.wait_for(rest(), HANG_S))
        assert _values(responses) == [0, 1] and responses[-1].final
    finally:
        first_loop.close()


def _sleep_seconds(seconds: float) -> dict:
    return {"SECONDS": numpy.array([seconds], dtype=numpy.float32)}


def test_the_loop_polls_for_its_other_events_too_before_it_sleeps(model):
    # While a task awaits a response (of a model that takes its time), the
    # loop's selector polls before it sleeps: for that response and for the
    # loop's other descriptors, so a socket that turned readable ends the
    # poll as the response would, and nothing waits on the poll.
    import socket

    async def main():
        loop = asyncio.get_running_loop()
        async def one():
            return [r async for r in model("sleep").async_infer(inputs=_sleep_seconds(0.5))]

        waiting = asyncio.ensure_future(one())
        await until(lambda: hooks().asyncio_waiting(_asyncio_waiters.for_loop(loop)) == 1)
        selector = loop._selector
        assert isinstance(selector, _asyncio_waiters._PollingSelector)
        waiters = _asyncio_waiters.for_loop(loop)
        assert not waiters.poll_news(selector._epoll_fd, 0.001)  # nothing came
        left, right = socket.socketpair()
        got = loop.create_future()
        loop.add_reader(left.fileno(), lambda: got.set_result(left.recv(1)))
        right.send(b"x")
        assert waiters.poll_news(selector._epoll_fd, 0.001)  # the socket's event
        assert await asyncio.wait_for(got, HANG_S) == b"x"
        loop.remove_reader(left.fileno())
        left.close(), right.close()
        responses = await waiting
        assert waiters.poll_news(selector._epoll_fd, 0.001) is False  # nobody waits: no poll
        return responses

    responses = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert as_numpy(responses[0].outputs["OUT"]).tolist() == [0.5]


def test_a_loop_serving_sockets_and_requests_at_once_answers_both(model):
    # An echo server on the loop that awaits add_sub's responses: every
    # round trip and every result arrives (the poll before the loop sleeps
    # holds up neither), and the loop's selector closes with the loop.
    async def main():
        async def echo(reader, writer):
            while line := await reader.readline():
                writer.write(line)
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def client(index):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for i in range(50):
                writer.write(f"{index} {i}\n".encode())
                assert await reader.readline() == f"{index} {i}\n".encode()
            writer.close()
            await writer.wait_closed()

        async def infer(index):
            sums = []
            for i in range(50):
                a = numpy.full(4, index, dtype=numpy.float32)
                b = numpy.full(4, i, dtype=numpy.float32)
                async for response in model("add_sub").async_infer(inputs={"INPUT0": a, "INPUT1": b}):
                    sums.append(as_numpy(response.outputs["OUTPUT0"])[0])
            return sums

        results = await asyncio.gather(*(client(i) for i in range(4)), *(infer(i) for i in range(8)))
        server.close()
        await server.wait_closed()
        return results[4:], asyncio.get_running_loop()._selector

    for _ in range(3):  # a fresh loop (and selector) each time
        sums, selector = asyncio.run(asyncio.wait_for(main(), HANG_S))
        assert sums == [[float(index + i) for i in range(50)] for index in range(8)]
        assert selector._inner.get_map() is None  # closed with its loop
