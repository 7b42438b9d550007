"""The host pool keeps large output blocks for reuse, within its bound."""

import numpy

from common import as_numpy, assert_no_live_buffers, hooks, single
from tritonserver import _native

MiB = 1 << 20
POOL_LIMIT = 256 * MiB  # kMaxCachedBytes in cpp/host_pool.cc


def respond(model, data):
    return single(model("identity_fp32").infer(inputs={"INPUT0": data}))


def test_large_output_block_is_reused(model):
    _native.host_pool_trim()
    data = numpy.arange(MiB, dtype=numpy.float32)  # 4 MiB
    first = respond(model, data)
    address = first.outputs["OUTPUT0"].data_ptr
    numpy.testing.assert_array_equal(as_numpy(first.outputs["OUTPUT0"]), data)
    del first
    assert_no_live_buffers()
    assert hooks().host_pool_cached_bytes() >= 4 * MiB

    second = respond(model, data[::-1].copy())
    assert second.outputs["OUTPUT0"].data_ptr == address  # the same block again
    numpy.testing.assert_array_equal(as_numpy(second.outputs["OUTPUT0"]), data[::-1])
    del second
    assert_no_live_buffers()


def test_small_outputs_are_not_pooled(model):
    _native.host_pool_trim()
    response = respond(model, numpy.ones(1024, numpy.float32))
    del response
    assert_no_live_buffers()
    assert hooks().host_pool_cached_bytes() == 0


def test_pool_is_bounded_and_trims(model):
    _native.host_pool_trim()
    data = numpy.ones(4 * MiB, numpy.float32)  # 16 MiB per output
    held = [respond(model, data) for _ in range(24)]  # 384 MiB in use at once
    assert len({r.outputs["OUTPUT0"].data_ptr for r in held}) == 24
    del held
    assert_no_live_buffers()
    cached = hooks().host_pool_cached_bytes()
    assert 16 * MiB <= cached <= POOL_LIMIT
    _native.host_pool_trim()
    assert hooks().host_pool_cached_bytes() == 0
