"""Memory: every output buffer is freed once the responses and the arrays
that share it are dropped (the live-buffer registry returns to zero), and
the process does not grow with the number of requests: after a warm-up,
thousands more requests (CPU outputs, BYTES outputs, decoupled streams,
cancelled streams) grow the resident set by less than 1 MiB.

The per-request growth is printed (run with -s to see it); measured
numbers are in docs/hostile_inputs.md, "Memory"."""

from __future__ import annotations

import gc

import numpy
import pytest

import tritonserver
from common import as_numpy, assert_no_live_buffers, drain_deferred, hooks, rss_bytes, settle, single

MiB = 1 << 20
BOUND = 1 * MiB


def growth(name: str, request, warmup: int, count: int) -> int:
    """RSS growth over `count` calls of `request` after `warmup` calls."""
    for _ in range(warmup):
        request()
    settle(trim_host_pool=True)
    before = rss_bytes()
    for _ in range(count):
        request()
    settle(trim_host_pool=True)
    grown = rss_bytes() - before
    print(f"\n{name}: {count} requests after {warmup} warm-up: RSS growth {grown} B "
          f"({grown / count:.2f} B/request)")
    return grown


# -- the requests measured ----------------------------------------------------------------
def cpu_output(model):
    m = model("identity_fp32")
    data = numpy.arange(256, dtype=numpy.float32)

    def request():
        response = single(m.infer(inputs={"INPUT0": data}))
        assert as_numpy(response.outputs["OUTPUT0"])[255] == 255.0

    return request


def bytes_output(model):
    m = model("identity_bytes")
    data = numpy.array([b"alpha", b"", b"\x00\xff" * 50, "unicode é".encode()], dtype=object)

    def request():
        response = single(m.infer(inputs={"INPUT0": data}))
        assert response.outputs["OUTPUT0"].to_bytes_array()[2] == b"\x00\xff" * 50

    return request


def stream(model):
    m = model("streaming")
    count = numpy.array([5], numpy.int32)

    def request():
        responses = list(m.infer(inputs={"COUNT": count}))
        assert len(responses) == 6 and as_numpy(responses[4].outputs["OUT"])[0] == 4

    return request


def cancelled_stream(model):
    m = model("streaming")
    inputs = {"COUNT": numpy.array([1000], numpy.int32), "DELAY_MS": numpy.array([1], numpy.int32)}
    calls = [0]

    def request():
        calls[0] += 1
        iterator = m.infer(inputs=inputs, raise_on_error=False)
        if calls[0] % 4 == 0:
            next(iterator)  # cancel mid-stream, one time in four; else before it starts
        iterator.cancel()
        last = list(iterator)[-1]
        assert last.final and isinstance(last.error, tritonserver.CancelledError)

    return request


# Warm-up: 500 requests; 2,000 for streams, whose python backend settles
# later (its shared-memory pages and the allocator arenas of its threads are
# touched progressively over the first few thousand streams, then stay flat).
CASES = {
    "cpu_output": (cpu_output, 500),
    "bytes_output": (bytes_output, 500),
    "stream_count5": (stream, 2000),
    "cancelled_stream": (cancelled_stream, 500),
}


@pytest.mark.parametrize("case, count", [("cpu_output", 2000), ("bytes_output", 2000), ("stream_count5", 500),
                                         ("cancelled_stream", 2000)])
def test_rss_does_not_grow(model, case, count):
    make, warmup = CASES[case]
    assert growth(case, make(model), warmup, count) < BOUND
    assert_no_live_buffers()


@pytest.mark.stress
@pytest.mark.parametrize("case, count", [("cpu_output", 10_000), ("bytes_output", 10_000),
                                         ("stream_count5", 2_000), ("cancelled_stream", 10_000)])
def test_rss_does_not_grow_stress(model, case, count):
    make, warmup = CASES[case]
    if case == "stream_count5":
        warmup = 3000
    assert growth(case, make(model), warmup, count) < BOUND
    assert_no_live_buffers()


# -- the live-buffer registry ------------------------------------------------------------
def live() -> int:
    gc.collect()
    drain_deferred()
    return hooks().live_buffer_count()


def test_buffers_live_exactly_as_long_as_their_outputs(model):
    assert_no_live_buffers()
    m = model("identity_fp32")
    responses = [single(m.infer(inputs={"INPUT0": numpy.full(64, i, numpy.float32)})) for i in range(10)]
    assert live() == 10
    arrays = [as_numpy(r.outputs["OUTPUT0"]) for r in responses]
    del responses
    assert live() == 10  # the arrays share the buffers (zero-copy)
    assert [a.tolist() for a in arrays] == [[i] * 64 for i in range(10)]
    del arrays[:5]
    assert live() == 5
    del arrays
    assert_no_live_buffers()


def test_buffers_freed_for_every_kind_of_output(model):
    assert_no_live_buffers()
    # BYTES: the decoded array is a copy; the buffer goes with the response.
    response = single(model("identity_bytes").infer(inputs={"INPUT0": numpy.array([b"x", b"yz"], dtype=object)}))
    decoded = response.outputs["OUTPUT0"].to_bytes_array()
    assert live() == 1
    del response
    assert live() == 0 and decoded.tolist() == [b"x", b"yz"]
    # A stream: one buffer per response.
    responses = list(model("streaming").infer(inputs={"COUNT": numpy.array([7], numpy.int32)}))
    assert live() == 7
    del responses
    assert live() == 0
    # A DLPack capsule made and never consumed.
    response = single(model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(8, numpy.float32)}))
    capsule = response.outputs["OUTPUT0"].__dlpack__()
    del response
    assert live() == 1
    del capsule
    assert live() == 0
    # Error responses and cancelled streams leave nothing behind.
    errors = list(model("raise_error").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, raise_on_error=False))
    assert errors[-1].error is not None
    iterator = model("streaming").infer(
        inputs={"COUNT": numpy.array([1000], numpy.int32), "DELAY_MS": numpy.array([1], numpy.int32)},
        raise_on_error=False)
    first = next(iterator)
    iterator.cancel()
    rest = list(iterator)
    assert isinstance(rest[-1].error, tritonserver.CancelledError)
    del errors, iterator, first, rest
    assert_no_live_buffers()
