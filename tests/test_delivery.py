"""How responses reach the caller: blocking iteration, asyncio (one loop or
several, in several threads), user queues, decoupled streams, cancellation,
request timeouts, request parameters, error responses, and misuse from two
threads."""

from __future__ import annotations

import asyncio
import gc
import json
import queue
import threading
import time
import weakref

import numpy
import pytest

import tritonserver
from tritonserver import CancelledError, InferenceResponse
from common import (BY_POINTER_FP32, MODELS, as_numpy, assert_no_live_buffers, call_with_deadline, dedicated_server, fp32,
                    python_model_repository,
                    hooks, run_loops_in_threads, run_script, single, streaming_inputs, until, wait_for)

HANG_S = 60  # a generous deadline: only there so a bug cannot hang the suite



# -- blocking iteration -----------------------------------------------------------------
def test_sync_iteration(model):
    a, b = fp32(1, 2, 3), fp32(10, 20, 30)
    iterator = model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}, request_id="req-42")
    assert isinstance(iterator, tritonserver.ResponseIterator)
    assert iter(iterator) is iterator
    response = next(iterator)
    assert isinstance(response, InferenceResponse)
    assert response.final and response.error is None
    assert response.request_id == "req-42"
    assert response.model.name == "add_sub"
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), a + b)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), a - b)
    with pytest.raises(StopIteration):
        next(iterator)
    with pytest.raises(StopIteration):
        next(iterator)


def test_iterator_in_a_reference_cycle_is_collected(model):
    """ResponseIterator keeps its model, request and InferenceRequest in its
    native base, which shows them to the garbage collector: a cycle through
    the iterator is freed, and a Python subclass instance still takes
    attributes of its own."""
    request = model("identity_fp32").create_request(inputs={"INPUT0": fp32(1, 2)})
    iterator = model("identity_fp32").infer(request)
    assert [r.final for r in iterator] == [True]
    iterator.note = "a user attribute"
    request.cycle = iterator  # InferenceRequest -> iterator -> InferenceRequest
    gone = weakref.ref(iterator)
    del request, iterator
    gc.collect()
    assert gone() is None


def test_blocking_waits_poll_briefly_then_sleep(model):
    """A blocking wait polls for at most a short while (cpp/spin_wait.h)
    before it sleeps: back-to-back fast requests each get their own
    response, and waits on a slow model leave the waiting thread's CPU
    almost idle, both on the first waits and once the thread has backed
    off from polling. The CPU bounds are generous (polling without limit
    would use all of each wait), not speed assertions."""
    identity = model("identity_fp32")
    for i in range(2000):
        response = single(identity.infer(inputs={"INPUT0": numpy.full(4, i, numpy.float32)}))
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [float(i)] * 4

    sleep = model("sleep")
    seconds = {"SECONDS": fp32(0.1)}
    for _ in range(12):  # past the misses that make a thread back off
        start_cpu, start = time.thread_time(), time.monotonic()
        single(sleep.infer(inputs=seconds))
        cpu, wall = time.thread_time() - start_cpu, time.monotonic() - start
        assert wall >= 0.09
        assert cpu < 0.5 * wall, f"the waiting thread used {cpu:.3f} s of CPU in a {wall:.3f} s wait"


def test_identity_sync_many_in_flight(model):
    m = model("identity_fp32")
    iterators = [(i, m.infer(inputs={"INPUT0": numpy.full(16, i, numpy.float32)})) for i in range(32)]
    for i, iterator in iterators:
        numpy.testing.assert_array_equal(as_numpy(single(iterator).outputs["OUTPUT0"]),
                                         numpy.full(16, i, numpy.float32))


# -- asyncio ----------------------------------------------------------------------------------
async def _collect(async_iterator) -> list:
    return [response async for response in async_iterator]


def test_identity_asyncio_gather_64(model):
    m = model("identity_fp32")

    async def one(i):
        data = numpy.arange(i, i + 100, dtype=numpy.float32)
        iterator = m.async_infer(inputs={"INPUT0": data}, request_id=f"r{i}")
        assert isinstance(iterator, tritonserver.AsyncResponseIterator)
        responses = await _collect(iterator)
        assert len(responses) == 1 and responses[0].final and responses[0].error is None
        assert responses[0].request_id == f"r{i}"
        return as_numpy(responses[0].outputs["OUTPUT0"]).copy()

    async def main():
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(64))), HANG_S)

    results = asyncio.run(main())
    assert len(results) == 64
    for i, result in enumerate(results):
        numpy.testing.assert_array_equal(result, numpy.arange(i, i + 100, dtype=numpy.float32))


def test_asyncio_gather_python_backend(model):
    m = model("add_sub")

    async def one(i):
        responses = await _collect(m.async_infer(inputs={"INPUT0": fp32(i, 1), "INPUT1": fp32(1, i)}))
        assert len(responses) == 1 and responses[0].final
        return as_numpy(responses[0].outputs["OUTPUT0"]).tolist(), as_numpy(responses[0].outputs["OUTPUT1"]).tolist()

    async def main():
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(64))), HANG_S)

    for i, (total, difference) in enumerate(asyncio.run(main())):
        assert total == [i + 1, i + 1]
        assert difference == [i - 1, 1 - i]


def test_identity_async_iterator_refuses_sync_iteration(model):
    async def main():
        iterator = model("identity_fp32").async_infer(inputs={"INPUT0": fp32(1)})
        with pytest.raises(TypeError):
            next(iterator)
        return await _collect(iterator)

    responses = asyncio.run(main())
    assert len(responses) == 1 and as_numpy(responses[0].outputs["OUTPUT0"]).tolist() == [1.0]


def test_identity_async_infer_needs_a_running_loop(model):
    with pytest.raises(RuntimeError):
        model("identity_fp32").async_infer(inputs={"INPUT0": fp32(1)})


def test_identity_several_event_loops_in_several_threads(model):
    m = model("identity_fp32")

    async def main(t):
        async def one(i):
            value = t * 1000 + i
            responses = await _collect(m.async_infer(inputs={"INPUT0": numpy.full(8, value, numpy.float32)}))
            return value, as_numpy(responses[0].outputs["OUTPUT0"]).copy()

        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(16))), HANG_S)

    results = run_loops_in_threads(main, 4, HANG_S)
    for t, pairs in results.items():
        assert len(pairs) == 16
        for value, array in pairs:
            numpy.testing.assert_array_equal(array, numpy.full(8, value, numpy.float32))


def test_identity_asyncio_loop_reused_after_close_and_new_loop(model):
    # A second asyncio.run (new loop) after the first one closed still works.
    for round_ in range(3):
        async def main():
            return await asyncio.wait_for(
                _collect(model("identity_fp32").async_infer(inputs={"INPUT0": fp32(round_)})), HANG_S)

        responses = asyncio.run(main())
        assert as_numpy(responses[0].outputs["OUTPUT0"]).tolist() == [round_]


def test_finished_event_loops_are_released_with_their_waiters(model):
    # Each loop that awaited a response gets its waiters (an eventfd reader); once
    # the loop has finished, neither may keep the other, or its eventfd, alive.
    from tritonserver._api import _asyncio_waiters

    loops = []
    for _ in range(3):
        async def main():
            loops.append(weakref.ref(asyncio.get_running_loop()))
            # The delay makes the iterator wait, so the waiters are made.
            stream = model("streaming").async_infer(inputs=streaming_inputs(2, delay_ms=20))
            return await asyncio.wait_for(_collect(stream), HANG_S)

        assert [r.final for r in asyncio.run(main())] == [False, False, True]
    gc.collect()
    assert [ref() for ref in loops] == [None, None, None]
    assert len(_asyncio_waiters._by_loop) == 0


# -- user queues ---------------------------------------------------------------------------------
def test_simple_queue_receives_response_before_iteration(model):
    a, b = fp32(2, 4), fp32(1, 1)
    response_queue = queue.SimpleQueue()
    iterator = model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}, response_queue=response_queue)
    queued = response_queue.get(timeout=HANG_S)  # nobody has iterated yet
    assert isinstance(queued, InferenceResponse)
    assert queued.final and queued.error is None
    numpy.testing.assert_array_equal(as_numpy(queued.outputs["OUTPUT0"]), a + b)
    iterated = single(iterator)
    numpy.testing.assert_array_equal(as_numpy(iterated.outputs["OUTPUT1"]), a - b)
    assert response_queue.empty()


def test_identity_queue_and_async_queue(model):
    response_queue = queue.SimpleQueue()
    iterator = model("identity_fp32").infer(inputs={"INPUT0": fp32(1, 2)}, response_queue=response_queue)
    assert as_numpy(response_queue.get(timeout=HANG_S).outputs["OUTPUT0"]).tolist() == [1.0, 2.0]
    assert as_numpy(single(iterator).outputs["OUTPUT0"]).tolist() == [1.0, 2.0]

    async def main():
        async_queue = asyncio.Queue()
        iterator = model("identity_fp32").async_infer(inputs={"INPUT0": fp32(3)}, response_queue=async_queue)
        queued = await asyncio.wait_for(async_queue.get(), HANG_S)
        responses = await asyncio.wait_for(_collect(iterator), HANG_S)
        return queued, responses

    queued, responses = asyncio.run(main())
    assert queued.final and as_numpy(queued.outputs["OUTPUT0"]).tolist() == [3.0]
    assert len(responses) == 1 and as_numpy(responses[0].outputs["OUTPUT0"]).tolist() == [3.0]
    assert response_queue.empty()


@pytest.mark.parametrize("kind", ["simple_queue", "asyncio_queue"])
def test_identity_queue_keeps_nothing_alive(model, kind):
    # Once the caller has dropped everything, neither the response (its
    # output buffer) nor the request (its inputs) may be kept alive by the
    # machinery that fed the queue.
    data = numpy.arange(BY_POINTER_FP32, dtype=numpy.float32)  # held by the request (smaller ones are copied)
    input_ref = weakref.ref(data)
    if kind == "simple_queue":
        response_queue = queue.SimpleQueue()
        iterator = model("identity_fp32").infer(inputs={"INPUT0": data}, response_queue=response_queue)
        queued = response_queue.get(timeout=HANG_S)
        iterated = single(iterator)
    else:
        async def main(payload):
            async_queue = asyncio.Queue()
            iterator = model("identity_fp32").async_infer(inputs={"INPUT0": payload}, response_queue=async_queue)
            return await asyncio.wait_for(async_queue.get(), HANG_S), await _collect(iterator)

        queued, [iterated] = asyncio.run(main(data))
        response_queue = iterator = None
    numpy.testing.assert_array_equal(as_numpy(queued.outputs["OUTPUT0"]), data)
    assert queued.outputs["OUTPUT0"].data_ptr == iterated.outputs["OUTPUT0"].data_ptr  # one buffer, shared
    pointer = queued.outputs["OUTPUT0"].data_ptr
    del queued, iterated, iterator, response_queue, data
    assert_no_live_buffers()
    assert pointer not in hooks().live_buffer_addresses()
    assert wait_for(lambda: input_ref() is None, HANG_S), "the request's input is still referenced"


def test_two_requests_share_a_queue(model):
    response_queue = queue.SimpleQueue()
    first = model("add_sub").infer(inputs={"INPUT0": fp32(1), "INPUT1": fp32(1)}, response_queue=response_queue,
                                   request_id="first")
    second = model("add_sub").infer(inputs={"INPUT0": fp32(5), "INPUT1": fp32(2)}, response_queue=response_queue,
                                    request_id="second")
    got = {r.request_id: r for r in (response_queue.get(timeout=HANG_S), response_queue.get(timeout=HANG_S))}
    assert sorted(got) == ["first", "second"]
    assert as_numpy(got["first"].outputs["OUTPUT0"]).tolist() == [2.0]
    assert as_numpy(got["second"].outputs["OUTPUT1"]).tolist() == [3.0]
    assert single(first).request_id == "first"
    assert single(second).request_id == "second"
    assert response_queue.empty()


def test_queue_receives_a_whole_stream_in_order(model):
    response_queue = queue.Queue()
    iterator = model("streaming").infer(inputs=streaming_inputs(10), response_queue=response_queue)
    queued = [response_queue.get(timeout=HANG_S) for _ in range(11)]
    assert [as_numpy(r.outputs["OUT"]).tolist() for r in queued[:10]] == [[i] for i in range(10)]
    assert [r.final for r in queued] == [False] * 10 + [True]
    iterated = call_with_deadline(lambda: list(iterator))
    assert [r.final for r in iterated] == [False] * 10 + [True]
    assert response_queue.empty()


def test_identity_response_queue_must_have_put_nowait(model):
    with pytest.raises(tritonserver.InvalidArgumentError):
        model("identity_fp32").infer(inputs={"INPUT0": fp32(1)}, response_queue=[])


def test_asyncio_queue_with_async_infer(model):
    async def main():
        response_queue = asyncio.Queue()
        a, b = fp32(3, 6), fp32(1, 2)
        iterator = model("add_sub").async_infer(inputs={"INPUT0": a, "INPUT1": b}, response_queue=response_queue)
        queued = await asyncio.wait_for(response_queue.get(), HANG_S)
        assert queued.final and queued.error is None
        numpy.testing.assert_array_equal(as_numpy(queued.outputs["OUTPUT0"]), a + b)
        responses = await asyncio.wait_for(_collect(iterator), HANG_S)
        assert len(responses) == 1
        numpy.testing.assert_array_equal(as_numpy(responses[0].outputs["OUTPUT1"]), a - b)
        assert response_queue.empty()

        stream_queue = asyncio.Queue()
        stream = model("streaming").async_infer(inputs=streaming_inputs(5), response_queue=stream_queue)
        queued = [await asyncio.wait_for(stream_queue.get(), HANG_S) for _ in range(6)]
        assert [r.final for r in queued] == [False] * 5 + [True]
        assert [as_numpy(r.outputs["OUT"]).tolist() for r in queued[:5]] == [[i] for i in range(5)]
        assert len(await asyncio.wait_for(_collect(stream), HANG_S)) == 6

    asyncio.run(main())


def _stream_values(responses) -> list:
    return [as_numpy(r.outputs["OUT"]).tolist()[0] for r in responses if "OUT" in r.outputs]


def test_bounded_queue_receives_every_response_of_a_stream(model):
    # A full queue.Queue(maxsize=2) used to lose the responses that found it
    # full, the final one among them (the consumer then waited forever).
    response_queue = queue.Queue(maxsize=2)
    iterator = model("streaming").infer(inputs=streaming_inputs(7), response_queue=response_queue)
    iterated = call_with_deadline(lambda: list(iterator))  # the whole stream has been produced
    assert wait_for(response_queue.full, HANG_S)  # the dispatcher thread fills it
    queued = []
    while not queued or not queued[-1].final:
        queued.append(response_queue.get(timeout=HANG_S))
        time.sleep(0.01)  # a slow consumer
    assert _stream_values(queued) == list(range(7)) == _stream_values(iterated)
    assert [r.final for r in queued] == [False] * 7 + [True]
    assert all(r.error is None for r in queued)
    assert response_queue.empty()


def test_bounded_asyncio_queue_receives_every_response_of_a_stream(model):
    # With a full asyncio.Queue(maxsize=2), QueueFull used to go to the
    # loop's exception handler and the response was lost.
    async def main():
        loop = asyncio.get_running_loop()
        handled = []
        loop.set_exception_handler(lambda _loop, context: handled.append(context))
        response_queue = asyncio.Queue(maxsize=2)
        iterator = model("streaming").async_infer(inputs=streaming_inputs(7), response_queue=response_queue)
        iterated = await asyncio.wait_for(_collect(iterator), HANG_S)
        await until(response_queue.full)  # the dispatcher thread fills it
        queued = []
        while not queued or not queued[-1].final:
            queued.append(await asyncio.wait_for(response_queue.get(), HANG_S))
            await asyncio.sleep(0.01)  # a slow consumer
        return handled, queued, iterated

    handled, queued, iterated = asyncio.run(main())
    assert handled == []
    assert _stream_values(queued) == list(range(7)) == _stream_values(iterated)
    assert [r.final for r in queued] == [False] * 7 + [True]


class _RaisingQueue:
    """A user queue whose first put_nowait raises (e.g. a queue closed by its
    consumer); it accepts what comes after."""

    def __init__(self) -> None:
        self.calls = 0
        self.items: "queue.SimpleQueue[InferenceResponse]" = queue.SimpleQueue()

    def put_nowait(self, item) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("queue closed by its consumer")
        self.items.put(item)


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["thread", "asyncio"])
def test_raising_queue_is_reported(model, caplog, use_asyncio):
    # A put_nowait that raises used to be swallowed: the consumer was never
    # told. Now: a log record on "tritonserver", the request is cancelled
    # (its iterator ends with CancelledError) and the queue is offered a
    # final error response.
    user_queue = _RaisingQueue()
    inputs = streaming_inputs(200, delay_ms=20)  # ~4 s unless cancelled
    with caplog.at_level("ERROR", logger="tritonserver"):
        if use_asyncio:
            async def main():
                iterator = model("streaming").async_infer(inputs=inputs, response_queue=user_queue)
                with pytest.raises(CancelledError):
                    await asyncio.wait_for(_collect(iterator), HANG_S)
                await until(lambda: not user_queue.items.empty())  # the notice, put on this loop
            asyncio.run(main())
        else:
            iterator = model("streaming").infer(inputs=inputs, response_queue=user_queue)
            with pytest.raises(CancelledError):
                call_with_deadline(lambda: list(iterator))
        notice = user_queue.items.get(timeout=HANG_S)
    assert notice.final and isinstance(notice.error, tritonserver.InternalError)
    assert "RuntimeError: queue closed by its consumer" in str(notice.error)
    assert user_queue.items.empty()  # nothing after the notice
    records = [r for r in caplog.records if r.name == "tritonserver" and "response queue" in r.getMessage()]
    assert len(records) == 1 and records[0].levelname == "ERROR"
    assert "queue closed by its consumer" in records[0].getMessage()


def test_an_asyncio_queue_whose_loop_closed_is_reported_once(model, caplog):
    # The loop of an asyncio.Queue given as response_queue ended before the
    # stream did: one record says so and the request is cancelled; its
    # later (cancelled final) response is not reported again.
    streaming = model("streaming")

    async def main():
        user_queue = asyncio.Queue()
        streaming.async_infer(inputs=streaming_inputs(50, delay_ms=20), response_queue=user_queue)
        return await asyncio.wait_for(user_queue.get(), HANG_S)

    with caplog.at_level("ERROR", logger="tritonserver"):
        first = asyncio.run(main())
        assert as_numpy(first.outputs["OUT"]).tolist() == [0]
        assert wait_for(user_queues_settled, HANG_S)  # the final response went by too
    records = [r for r in caplog.records if "response queue" in r.getMessage()]
    assert len(records) == 1, [r.getMessage()[:120] for r in records]
    assert "Event loop is closed" in records[0].getMessage()


def user_queues_settled() -> bool:
    """No request feeds a user queue any more, and none is remembered as
    failed (forgotten when its final response passes)."""
    from tritonserver._api import _user_queues

    return not _user_queues._targets and not _user_queues._failed


# -- decoupled streams -------------------------------------------------------------------------
def test_decoupled_stream_of_100_in_order(model):
    responses = call_with_deadline(lambda: list(model("streaming").infer(inputs=streaming_inputs(100))))
    assert len(responses) == 101
    assert [r.final for r in responses] == [False] * 100 + [True]
    assert all(r.error is None for r in responses)
    for i, response in enumerate(responses[:100]):
        out = response.outputs["OUT"]
        assert out.data_type == tritonserver.DataType.INT32
        assert as_numpy(out).tolist() == [i]
    assert responses[-1].outputs == {}


def test_decoupled_stream_async(model):
    async def main():
        return await asyncio.wait_for(_collect(model("streaming").async_infer(inputs=streaming_inputs(100))), HANG_S)

    responses = asyncio.run(main())
    assert [r.final for r in responses] == [False] * 100 + [True]
    assert [as_numpy(r.outputs["OUT"]).tolist()[0] for r in responses[:100]] == list(range(100))


def test_decoupled_empty_stream(model):
    responses = call_with_deadline(lambda: list(model("streaming").infer(inputs=streaming_inputs(0))))
    assert len(responses) == 1
    assert responses[0].final and responses[0].outputs == {} and responses[0].error is None


# -- cancellation -------------------------------------------------------------------------------
def test_cancelled_error_is_an_unknown_error():
    assert issubclass(CancelledError, tritonserver.UnknownError)
    assert issubclass(CancelledError, tritonserver.TritonError)


def test_cancel_mid_stream_raises_cancelled_error(model):
    iterator = model("streaming").infer(inputs=streaming_inputs(1000, delay_ms=10), raise_on_error=True)
    received = []

    def consume():
        with pytest.raises(CancelledError) as caught:
            for response in iterator:
                received.append(response)
                if len(received) == 3:
                    iterator.cancel()
        return caught.value

    error = call_with_deadline(consume)
    assert isinstance(error, tritonserver.UnknownError)
    assert 3 <= len(received) < 1000
    assert all(r.error is None and not r.final for r in received)
    assert [as_numpy(r.outputs["OUT"]).tolist()[0] for r in received] == list(range(len(received)))
    with pytest.raises(StopIteration):  # the stream has ended
        next(iterator)


def test_cancel_mid_stream_without_raising(model):
    iterator = model("streaming").infer(inputs=streaming_inputs(1000, delay_ms=10), raise_on_error=False)

    def consume():
        received = []
        for response in iterator:
            received.append(response)
            if len(received) == 3:
                iterator.cancel()
        return received

    received = call_with_deadline(consume)
    assert 4 <= len(received) < 1000
    last = received[-1]
    assert last.final
    assert isinstance(last.error, CancelledError)
    assert isinstance(last.error, tritonserver.UnknownError)
    assert all(r.error is None and not r.final for r in received[:-1])


def test_cancel_mid_stream_async(model):
    async def main():
        iterator = model("streaming").async_infer(inputs=streaming_inputs(1000, delay_ms=10), raise_on_error=False)
        received = []
        async for response in iterator:
            received.append(response)
            if len(received) == 2:
                iterator.cancel()
        return received

    received = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert 3 <= len(received) < 1000
    assert received[-1].final and isinstance(received[-1].error, CancelledError)


def test_identity_cancel_after_completion_is_harmless(model):
    iterator = model("identity_fp32").infer(inputs={"INPUT0": fp32(1, 2)})
    response = single(iterator)
    iterator.cancel()
    assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [1.0, 2.0]
    with pytest.raises(StopIteration):
        next(iterator)


# -- request timeout ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sleep_queued(server):
    """The sleep model behind a dynamic batcher whose queue honours request
    timeouts (Triton only times requests out in a scheduler queue with
    allow_timeout_override; the default scheduler ignores `timeout`)."""
    config = {
        "name": "sleep_queued",
        "backend": "python",
        "max_batch_size": 1,
        "input": [{"name": "SECONDS", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
        "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        "dynamic_batching": {
            "default_queue_policy": {"allow_timeout_override": True, "default_timeout_microseconds": 60_000_000}
        },
    }
    source = (MODELS / "sleep" / "1" / "model.py").read_bytes()
    server.load("sleep_queued", {"config": json.dumps(config), "file:1/model.py": source})
    yield server.model("sleep_queued")
    server.unload("sleep_queued")


@pytest.mark.parametrize("raise_on_error", [False, True])
@pytest.mark.python_backend
def test_request_timeout_in_queue(sleep_queued, raise_on_error):
    seconds = lambda s: {"SECONDS": numpy.array([[s]], dtype=numpy.float32)}  # noqa: E731
    blocker = sleep_queued.infer(inputs=seconds(0.5))
    timed = sleep_queued.infer(inputs=seconds(0.0), timeout=20_000, raise_on_error=raise_on_error)  # 20 ms

    if raise_on_error:
        def consume():
            with pytest.raises(tritonserver.UnavailableError, match="timeout") as caught:
                next(timed)
            return caught.value
        call_with_deadline(consume)
    else:
        responses = call_with_deadline(lambda: list(timed))
        assert len(responses) == 1
        assert responses[0].final
        assert isinstance(responses[0].error, tritonserver.UnavailableError)
        assert "timeout" in str(responses[0].error).lower()
        assert responses[0].outputs == {}
    with pytest.raises(StopIteration):  # the stream has ended
        next(timed)
    done = call_with_deadline(lambda: single(blocker))
    assert done.error is None
    assert as_numpy(done.outputs["OUT"]).tolist() == [[0.5]]


@pytest.mark.python_backend
def test_timeout_does_not_affect_a_fast_request(sleep_queued):
    response = single(sleep_queued.infer(inputs={"SECONDS": numpy.array([[0.0]], numpy.float32)}, timeout=30_000_000))
    assert response.error is None
    assert as_numpy(response.outputs["OUT"]).tolist() == [[0.0]]


# -- request parameters ------------------------------------------------------------------------
def test_parameters_round_trip_exactly(model):
    parameters = {
        "text": "héllo wörld",
        "empty": "",
        "zero": 0,
        "negative": -7,
        "big": 2**53 + 1,
        "int64_max": 2**63 - 1,
        "half": 0.5,
        "tenth": 0.1,
        "huge": 1.5e300,
        "negative_float": -2.75,
        "yes": True,
        "no": False,
    }
    response = single(model("parameters").infer(inputs={"INPUT0": fp32(0)}, parameters=parameters))
    [raw] = response.outputs["PARAMETERS"].to_bytes_array().tolist()
    echoed = json.loads(raw.decode("utf-8"))
    assert echoed == parameters
    for key, value in parameters.items():
        assert type(echoed[key]) is type(value), (key, echoed[key])


@pytest.mark.parametrize(
    "value",
    [None, {"nested": 1}, [1, 2], b"bytes", numpy.float32(1.0), numpy.int64(3), 1 + 2j, (1,)],
    ids=lambda v: type(v).__name__,
)
def test_unsupported_parameter_types_raise_at_infer(model, value):
    with pytest.raises(tritonserver.InvalidArgumentError, match="bad_key"):
        model("parameters").infer(inputs={"INPUT0": fp32(0)}, parameters={"ok": 1, "bad_key": value})
    response = single(model("parameters").infer(inputs={"INPUT0": fp32(0)}, parameters={"ok": 1}))
    assert json.loads(response.outputs["PARAMETERS"].to_bytes_array()[0]) == {"ok": 1}


# -- error responses -------------------------------------------------------------------------------
MESSAGE = "raise_error model: deliberate failure"


def test_error_response_raises_when_asked(model):
    iterator = model("raise_error").infer(inputs={"INPUT0": fp32(1)}, raise_on_error=True)
    with pytest.raises(tritonserver.TritonError, match=MESSAGE) as caught:
        call_with_deadline(lambda: next(iterator))
    assert type(caught.value) is not tritonserver.TritonError  # a specific subclass
    assert MESSAGE in str(caught.value)
    with pytest.raises(StopIteration):
        next(iterator)


def test_error_response_is_raised_by_default(model):
    with pytest.raises(tritonserver.TritonError, match=MESSAGE):
        call_with_deadline(lambda: list(model("raise_error").infer(inputs={"INPUT0": fp32(1)})))


def test_error_response_delivered_when_not_raising(model):
    responses = call_with_deadline(
        lambda: list(model("raise_error").infer(inputs={"INPUT0": fp32(1)}, raise_on_error=False)))
    assert len(responses) == 1
    response = responses[0]
    assert response.final
    assert isinstance(response.error, tritonserver.TritonError)
    assert type(response.error) is not tritonserver.TritonError
    assert MESSAGE in str(response.error)
    assert response.outputs == {}


def test_error_response_async(model):
    async def main():
        with pytest.raises(tritonserver.TritonError, match=MESSAGE):
            await _collect(model("raise_error").async_infer(inputs={"INPUT0": fp32(1)}, raise_on_error=True))
        return await _collect(model("raise_error").async_infer(inputs={"INPUT0": fp32(1)}, raise_on_error=False))

    responses = asyncio.run(asyncio.wait_for(main(), HANG_S))
    assert len(responses) == 1 and responses[0].final and MESSAGE in str(responses[0].error)


def test_error_response_through_queue(model):
    response_queue = queue.SimpleQueue()
    iterator = model("raise_error").infer(inputs={"INPUT0": fp32(1)}, raise_on_error=False,
                                          response_queue=response_queue)
    queued = response_queue.get(timeout=HANG_S)
    assert queued.final and MESSAGE in str(queued.error)
    assert MESSAGE in str(single(iterator).error)


# -- misuse --------------------------------------------------------------------------------------------
def test_two_threads_on_one_iterator(model):
    iterator = model("sleep").infer(inputs={"SECONDS": fp32(0.5)})
    barrier = threading.Barrier(2)
    outcomes: list = []
    lock = threading.Lock()

    def take():
        barrier.wait()
        try:
            value = next(iterator)
        except BaseException as e:  # noqa: BLE001
            value = e
        with lock:
            outcomes.append(value)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_S)
    assert not any(thread.is_alive() for thread in threads)
    kinds = sorted(type(o).__name__ for o in outcomes)
    assert kinds == ["InferenceResponse", "ValueError"], outcomes
    [response] = [o for o in outcomes if isinstance(o, InferenceResponse)]
    assert response.final and as_numpy(response.outputs["OUT"]).tolist() == [0.5]
    with pytest.raises(StopIteration):
        next(iterator)


def test_identity_a_request_object_can_be_sent_twice(model):
    request = model("identity_fp32").create_request(inputs={"INPUT0": fp32(7, 8)})
    first = single(model("identity_fp32").infer(request))
    second = single(model("identity_fp32").infer(request))
    assert as_numpy(first.outputs["OUTPUT0"]).tolist() == as_numpy(second.outputs["OUTPUT0"]).tolist() == [7.0, 8.0]
    assert first.outputs["OUTPUT0"].data_ptr != second.outputs["OUTPUT0"].data_ptr



POLL_BUDGET = """
import os
if {pin}:
    os.sched_setaffinity(0, {{sorted(os.sched_getaffinity(0))[0]}})
from tritonserver import _native
print(len(os.sched_getaffinity(0)), _native.testing.usable_cpus(), _native.testing.spin_pollers_allowed())
"""

NO_POLL_REQUESTS = """
import numpy, tritonserver
from tritonserver import _native
from common import make_options, single, as_numpy
assert _native.testing.spin_pollers_allowed() == 0
with tritonserver.Server(make_options({backends!r}, server_id="no-poll")) as server:
    server.load("identity_fp32")
    model = server.model("identity_fp32")
    for i in range(500):
        response = single(model.infer(inputs={{"INPUT0": numpy.full(4, i, numpy.float32)}}))
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [float(i)] * 4
print("served", i + 1)
"""


def _cgroup_quota_cpus() -> int:
    """The processors a cgroup v2 CPU quota allows (0: no quota or no v2)."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
    except (OSError, ValueError):
        return 0
    return 0 if quota == "max" else -(-int(quota) // int(period))


def test_poll_budget_follows_cpu_affinity_and_can_be_switched_off(backend_directory, tmp_path):
    """Threads poll only while fewer wait than the processors this process
    may use (its affinity and cgroup quota, not the machine's count), and
    TRITONSERVER_SPIN_WAIT=0 turns polling off; waits stay correct then."""
    hooks()  # the child processes read the test build's hooks
    rc, out, err = run_script(POLL_BUDGET.format(pin=True), tmp_path, timeout=60)
    assert rc == 0, err
    assert out.split() == ["1", "1", "1"]  # one processor: one poller at most

    rc, out, err = run_script(POLL_BUDGET.format(pin=False), tmp_path, timeout=60)
    assert rc == 0, err
    allowed_cpus, usable, pollers = map(int, out.split())
    quota = _cgroup_quota_cpus()
    assert usable == (min(allowed_cpus, quota) if quota else allowed_cpus)
    assert pollers == (usable - 1 if usable > 2 else 1)

    rc, out, err = run_script(NO_POLL_REQUESTS.format(backends=backend_directory), tmp_path, timeout=120,
                              env={"TRITONSERVER_SPIN_WAIT": "0"})
    assert rc == 0, err
    assert "served 500" in out


# -- cancel() ends the consumer's stream at once, whatever the backend does ---------------------
# The sleep model never looks at is_cancelled(): the core lets it finish its
# sleep. The consumer's side must still end at once (a cancel() ends the
# stream with CancelledError; the late response is dropped and released).
SLEEP_S = 6.0


def _cancelled_while_sleeping(server, cancel_first: bool) -> tuple[BaseException, float]:
    iterator = server.model("sleep").infer(inputs={"SECONDS": fp32(SLEEP_S)}, raise_on_error=True)
    outcome: dict = {}

    def consume():
        try:
            list(iterator)
        except BaseException as e:  # noqa: BLE001: what the consumer got
            outcome["error"] = e
        outcome["at"] = time.monotonic()

    if cancel_first:
        iterator.cancel()
    start = time.monotonic()
    consumer = threading.Thread(target=consume)
    consumer.start()
    if not cancel_first:
        iterator.cancel()  # the consumer waits, or is about to
    consumer.join(SLEEP_S * 3)
    assert not consumer.is_alive()
    return outcome.get("error"), outcome["at"] - start


@pytest.mark.parametrize("cancel_first", [True, False], ids=["before-iterating", "while-waiting"])
def test_cancel_ends_the_stream_at_once_on_a_model_that_ignores_it(backend_directory, cancel_first):
    with dedicated_server(backend_directory, "cancel-sleep", ["sleep"], exit_timeout=30) as server:
        error, took = _cancelled_while_sleeping(server, cancel_first)
        assert isinstance(error, CancelledError), error
        # A hang detector, not a speed test: the model sleeps SLEEP_S.
        assert took < SLEEP_S / 2, f"the stream ended {took:.2f} s after cancel(): it waited for the model"
        assert_no_live_buffers_after_the_model_finishes(server)


def assert_no_live_buffers_after_the_model_finishes(server) -> None:
    """The model's late response is released once it comes: the next
    request (queued behind the sleeping one) completes and nothing stays."""
    response = single(server.model("sleep").infer(inputs={"SECONDS": fp32(0.0)}))
    assert as_numpy(response.outputs["OUT"]).tolist() == [0.0]
    del response
    assert_no_live_buffers()


def test_cancel_ends_an_async_stream_at_once(backend_directory):
    with dedicated_server(backend_directory, "cancel-sleep-async", ["sleep"], exit_timeout=30) as server:
        async def main():
            iterator = server.model("sleep").async_infer(inputs={"SECONDS": fp32(SLEEP_S)})
            waiter = asyncio.ensure_future(iterator.__anext__())
            await asyncio.sleep(0)  # the task is now awaiting its future
            start = time.monotonic()
            iterator.cancel()
            with pytest.raises(CancelledError):
                await asyncio.wait_for(waiter, SLEEP_S * 3)
            return time.monotonic() - start

        took = asyncio.run(main())
        assert took < SLEEP_S / 2, f"the stream ended {took:.2f} s after cancel(): it waited for the model"
        assert_no_live_buffers_after_the_model_finishes(server)


# -- cancel() of a request its model answers after execute() returned -------------------------
# A decoupled model that answers from a thread of its own (an engine's loop):
# the core has released the request when execute() returned, before any
# response. cancel() must still end the consumer's stream and reach the
# model's response sender (is_cancelled()), on the stub as in-process.
SENDER_THREAD = """
import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        returned = threading.Event()
        for request in requests:
            sender = request.get_response_sender()
            def run(sender=sender):
                returned.wait()  # the first response comes after execute() returned
                sent = 0
                while sent < 500 and not sender.is_cancelled():
                    time.sleep(0.01)
                    sender.send(pb_utils.InferenceResponse(
                        [pb_utils.Tensor("OUTPUT0", np.full(2, sent, np.float32)),
                         pb_utils.Tensor("OUTPUT1", np.zeros(2, np.float32))]))
                    sent += 1
                with open(%(report)r, "w") as report:
                    report.write(f"{sent} {sender.is_cancelled()}")
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            thread = threading.Thread(target=run)
            thread.start()
            self.threads.append(thread)
        returned.set()
        return None

    def finalize(self):
        for thread in self.threads:
            thread.join()
"""
CANCEL_MODES = ["in-process", pytest.param("stub", marks=pytest.mark.python_stub)]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "asyncio"])
@pytest.mark.parametrize("mode", CANCEL_MODES)
def test_cancel_reaches_a_model_answering_after_execute_returned(backend_directory, tmp_path, mode,
                                                                 asynchronous):

    report = tmp_path / "report.txt"
    repo = python_model_repository(tmp_path, "sender", SENDER_THREAD % {"report": str(report)}, decoupled=True)
    inputs = {"INPUT0": numpy.zeros(2, numpy.float32), "INPUT1": numpy.zeros(2, numpy.float32)}
    with dedicated_server(backend_directory, f"cancel-released-{mode}", ["sender"], python_models=mode,
                          model_repository=str(repo), exit_timeout=30) as server:
        model = server.model("sender")

        def sync_consumer() -> list:
            iterator = model.infer(inputs=inputs, raise_on_error=True)
            first = next(iterator)
            iterator.cancel()
            with pytest.raises(CancelledError):
                for _ in iterator:  # what was queued before cancel(), then the end
                    pass
            return [first]

        async def async_consumer() -> list:
            iterator = model.async_infer(inputs=inputs, raise_on_error=True)
            first = await iterator.__anext__()
            iterator.cancel()
            with pytest.raises(CancelledError):
                async for _ in iterator:
                    pass
            return [first]

        consume = (lambda: asyncio.run(async_consumer())) if asynchronous else sync_consumer
        (first,) = call_with_deadline(consume, 60)
        assert as_numpy(first.outputs["OUTPUT0"]).tolist() == [0.0, 0.0]
        assert wait_for(report.exists, 60)
        sent, cancelled = wait_for_text(report).split()
        assert cancelled == "True" and int(sent) < 500, f"the model sent {sent} responses: it never saw cancel()"


def wait_for_text(path) -> str:
    """The file's text once it has some (written by another process)."""
    assert wait_for(lambda: path.exists() and path.read_text() != "", 60)
    return path.read_text()
