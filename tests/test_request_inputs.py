"""Inputs: layouts NumPy can produce (strided, reversed, Fortran-order,
read-only), inputs whose only owner is the request (temporaries from lists
and copies), Tensors and DLPack objects as inputs, and bad inputs refused at
infer() with the server still serving afterwards."""

from __future__ import annotations

import asyncio
import gc
import weakref

import numpy
import pytest

import tritonserver
from tritonserver import DataType, MemoryType, Tensor
from common import BY_POINTER_FP32, DLPackOnly, address, as_numpy, assert_no_live_buffers, drain_deferred, identity, single



def assert_still_serving(model):
    data = numpy.array([4.0, -1.0, 0.5], dtype=numpy.float32)
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), data), data)


# -- layouts ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a: a[::2], id="step2"),
        pytest.param(lambda a: a[1::3], id="offset_step3"),
        pytest.param(lambda a: a[::-1], id="reversed"),
        pytest.param(lambda a: a[-2::-5], id="reversed_step5"),
        pytest.param(lambda a: a.reshape(10, 10)[:, 3], id="column"),
        pytest.param(lambda a: numpy.broadcast_to(a[7:8], (9,)), id="broadcast_stride0"),
    ],
)
def test_identity_non_contiguous_inputs(model, make):
    base = numpy.arange(100, dtype=numpy.float32) * 1.5 - 20
    view = make(base)
    assert not view.flags.c_contiguous
    expected = view.copy()
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), view), expected)
    numpy.testing.assert_array_equal(base, numpy.arange(100, dtype=numpy.float32) * 1.5 - 20)


def test_identity_non_contiguous_tensor_from_dlpack(model):
    base = numpy.arange(50, dtype=numpy.float32)
    view = base[::-2]
    tensor = Tensor.from_dlpack(view)
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), tensor), view)


def test_identity_fortran_order_inputs(model):
    int8 = numpy.asfortranarray(numpy.arange(-12, 12, dtype=numpy.int8).reshape(4, 6))
    fp16 = numpy.asfortranarray(numpy.linspace(-3, 3, 60).astype(numpy.float16).reshape(3, 4, 5))
    uint64 = numpy.array([1, 2**63, 2**64 - 1], dtype=numpy.uint64)
    assert int8.flags.f_contiguous and not int8.flags.c_contiguous
    assert fp16.flags.f_contiguous and not fp16.flags.c_contiguous
    response = single(model("identity_multi").infer(inputs={"INPUT0": int8, "INPUT1": fp16, "INPUT2": uint64}))
    out0 = as_numpy(response.outputs["OUTPUT0"])
    out1 = as_numpy(response.outputs["OUTPUT1"])
    assert out0.shape == (4, 6) and out1.shape == (3, 4, 5)
    numpy.testing.assert_array_equal(out0, int8)
    numpy.testing.assert_array_equal(out1, fp16)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT2"]), uint64)


def test_identity_transposed_and_sliced_2d_inputs(model):
    base = numpy.arange(-60, 60, dtype=numpy.int8).reshape(10, 12)
    views = {"INPUT0": base.T[::3, 1:8:2],
             "INPUT1": numpy.ones((2, 2, 2), numpy.float16)[:, ::-1, :] * numpy.float16(0.5),
             "INPUT2": numpy.arange(10, dtype=numpy.uint64)[::-3]}
    response = single(model("identity_multi").infer(inputs=views))
    for k in range(3):
        numpy.testing.assert_array_equal(as_numpy(response.outputs[f"OUTPUT{k}"]), views[f"INPUT{k}"])


def test_identity_read_only_inputs(model):
    data = numpy.arange(32, dtype=numpy.float32)
    data.flags.writeable = False
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), data), data)
    frozen = numpy.frombuffer(bytes(numpy.arange(8, dtype=numpy.float32).tobytes()), dtype=numpy.float32)
    assert not frozen.flags.writeable
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), frozen), numpy.arange(8, dtype=numpy.float32))
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), Tensor.from_dlpack(frozen)), frozen)
    # A read-only strided view: copied, not written to.
    reversed_frozen = frozen[::-1]
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), reversed_frozen), frozen[::-1])


# -- zero-copy input and ownership -----------------------------------------------------
def test_identity_contiguous_input_is_passed_by_pointer(model):
    data = numpy.arange(64, dtype=numpy.float32)
    tensor = Tensor._from_object(data)
    assert tensor.data_ptr == address(data)
    assert tensor.memory_buffer.owner is data
    assert tensor.size == data.nbytes and tensor.memory_type == MemoryType.CPU
    assert tensor.data_type == DataType.FP32 and list(tensor.shape) == [64]
    assert Tensor.from_dlpack(data).data_ptr == address(data)
    output = identity(model("identity_fp32"), data)
    numpy.testing.assert_array_equal(output, data)
    assert address(output) != address(data)  # outputs are Triton's own buffers


def test_identity_request_keeps_input_alive_until_released(model):
    data = numpy.arange(BY_POINTER_FP32, dtype=numpy.float32)  # passed by pointer, not copied
    expected = data.copy()
    ref = weakref.ref(data)
    iterator = model("identity_fp32").infer(inputs={"INPUT0": data})
    del data
    gc.collect()
    assert ref() is not None, "the request must own its input until Triton releases it"
    response = single(iterator)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), expected)
    del iterator, response
    for _ in range(500):  # the release callback may trail the response a little
        gc.collect()
        drain_deferred()
        if ref() is None:
            break
        import time

        time.sleep(0.01)
    assert ref() is None, "the input must be freed once Triton released the request"


@pytest.mark.parametrize("wrap", [lambda a: a, DLPackOnly], ids=["ndarray", "dlpack"])
def test_a_refilled_input_array_does_not_change_requests_in_flight(model, wrap):
    """A small input is copied when async_infer() builds the request: the
    caller may refill its array at once. Ten requests of the one-instance
    `sleep` model, the array refilled before each: the nine queued behind
    the first each answer their own value (before: all the last one)."""
    sleep = model("sleep")
    seconds = numpy.zeros(1, numpy.float32)
    values = [0.3] + [0.01 * i for i in range(1, 10)]

    async def main() -> list[float]:
        iterators = []
        for value in values:
            seconds[0] = value
            iterators.append(sleep.async_infer(inputs={"SECONDS": wrap(seconds)}))
        answered = []
        for iterator in iterators:
            async for response in iterator:
                answered.append(float(as_numpy(response.outputs["OUT"])[0]))
        return answered

    assert asyncio.run(main()) == pytest.approx(values)


@pytest.mark.parametrize("elements, copied", [(16, True), (BY_POINTER_FP32 - 1, True), (BY_POINTER_FP32, False)])
def test_host_inputs_up_to_64_kib_are_copied_and_larger_ones_passed_by_pointer(inproc, elements, copied):
    """The in-process model reads the request's memory where it is
    (input_address): a copy made at build for up to 64 KiB (16,384 FP32),
    the client's own array beyond."""
    data = numpy.arange(elements, dtype=numpy.float32)
    response = single(inproc("input_address").infer(inputs={"INPUT0": data}))
    seen = int(as_numpy(response.outputs["ADDRESS"])[0])
    assert (seen != address(data)) is copied
    single(inproc("input_address").infer(inputs={"INPUT0": numpy.zeros(0, numpy.float32)}))  # drops what it keeps


def _churn() -> list:
    """Allocate and fill memory the size of the inputs, so a freed input
    buffer would most likely be overwritten."""
    garbage = []
    for i in range(40):
        garbage.append(numpy.full(2048, -(i + 1), dtype=numpy.float64))
        garbage.append([float(-i)] * 2048)
    return garbage


def test_list_temporaries_stay_alive(model):
    # Many requests in flight; their inputs exist only as temporaries made
    # from Python lists. We drop every reference, collect and churn memory
    # before reading the results.
    echo = model("echo_all_types")
    iterators = []
    for i in range(12):
        values = [float(i * 10000 + j) for j in range(2048)]
        iterators.append((i, echo.infer(inputs={"IN_FP64": values, "IN_INT64": list(range(i, i + 2048))})))
        del values
    for _ in range(3):
        gc.collect()
    garbage = _churn()
    for i, iterator in iterators:
        response = single(iterator)
        numpy.testing.assert_array_equal(
            as_numpy(response.outputs["OUT_FP64"]), numpy.arange(2048, dtype=numpy.float64) + i * 10000)
        numpy.testing.assert_array_equal(
            as_numpy(response.outputs["OUT_INT64"]), numpy.arange(i, i + 2048, dtype=numpy.int64))
    del garbage


def test_identity_copied_temporaries_stay_alive(model):
    # Non-contiguous inputs are copied; the copy's only owner is the request.
    iterators = []
    for i in range(12):
        base = numpy.arange(8192, dtype=numpy.float32) + i
        iterators.append((i, model("identity_fp32").infer(inputs={"INPUT0": base[::-2]})))
        del base
    gc.collect()
    garbage = _churn()
    for i, iterator in iterators:
        expected = (numpy.arange(8192, dtype=numpy.float32) + i)[::-2]
        numpy.testing.assert_array_equal(as_numpy(single(iterator).outputs["OUTPUT0"]), expected)
    del garbage


def test_identity_output_tensor_as_input(model):
    data = numpy.linspace(0, 1, 33, dtype=numpy.float32)
    first = single(model("identity_fp32").infer(inputs={"INPUT0": data})).outputs["OUTPUT0"]
    assert Tensor._from_object(first) is first
    second = single(model("identity_fp32").infer(inputs={"INPUT0": first})).outputs["OUTPUT0"]
    numpy.testing.assert_array_equal(as_numpy(second), data)
    assert second.data_ptr != first.data_ptr
    del first, second
    assert_no_live_buffers()


def test_identity_any_dlpack_object_as_input(model):
    data = numpy.arange(10, dtype=numpy.float32) * 3
    source = DLPackOnly(data)
    tensor = Tensor._from_object(source)
    assert tensor.data_ptr == address(data)
    numpy.testing.assert_array_equal(identity(model("identity_fp32"), source), data)


# -- bad inputs -------------------------------------------------------------------------
def test_identity_unknown_input_name(model):
    with pytest.raises(tritonserver.InvalidArgumentError, match="BOGUS"):
        model("identity_fp32").infer(inputs={"BOGUS": numpy.ones(3, numpy.float32)})
    assert_still_serving(model)


@pytest.mark.parametrize("dtype", [numpy.float64, numpy.int32, numpy.float16, numpy.bool_])
def test_identity_wrong_dtype(model, dtype):
    with pytest.raises(tritonserver.InvalidArgumentError, match="FP32"):
        model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(3, dtype)})
    assert_still_serving(model)


def test_identity_wrong_dtype_from_list(model):
    # A list of floats is FP64: refused by the FP32 model, not silently cast.
    with pytest.raises(tritonserver.InvalidArgumentError, match="FP64"):
        model("identity_fp32").infer(inputs={"INPUT0": [1.0, 2.0]})
    assert_still_serving(model)


def test_identity_wrong_rank_and_missing_input(model):
    with pytest.raises(tritonserver.InvalidArgumentError, match="shape"):
        model("identity_fp32").infer(inputs={"INPUT0": numpy.ones((2, 2), numpy.float32)})
    with pytest.raises(tritonserver.InvalidArgumentError, match="INPUT1"):
        model("identity_multi").infer(inputs={"INPUT0": numpy.ones((2, 2), numpy.int8),
                                              "INPUT2": numpy.ones(2, numpy.uint64)})
    with pytest.raises(tritonserver.InvalidArgumentError):
        model("identity_fp32").infer(inputs={})
    assert_still_serving(model)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(object(), id="object"),
        pytest.param([[1.0], [1.0, 2.0]], id="ragged_list"),
        pytest.param(numpy.ones(3, dtype=numpy.complex64), id="complex"),
        pytest.param(numpy.array(["2024-01-01"], dtype="datetime64[D]"), id="datetime"),
        pytest.param({"a": 1}, id="dict"),
    ],
)
def test_identity_unconvertible_inputs(model, value):
    with pytest.raises(tritonserver.InvalidArgumentError):
        model("identity_fp32").infer(inputs={"INPUT0": value})
    assert_still_serving(model)


def test_unknown_model_is_not_found(server):
    with pytest.raises(tritonserver.NotFoundError):
        server.model("no_such_model_anywhere").infer(inputs={"INPUT0": numpy.ones(1, numpy.float32)})


def test_identity_bad_inputs_do_not_leak(model):
    gc.collect()
    drain_deferred()
    for _ in range(20):
        with pytest.raises(tritonserver.InvalidArgumentError):
            model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(4, numpy.float32)[::2].astype(numpy.int8)})
        with pytest.raises(tritonserver.InvalidArgumentError):
            # A Tensor.from_dlpack copy (a native buffer) that the core refuses.
            model("identity_fp32").infer(inputs={"BOGUS": Tensor.from_dlpack(numpy.ones(8, numpy.float32)[::2])})
    assert_still_serving(model)
    assert_no_live_buffers()


def test_errors_are_triton_error_subclasses():
    for cls in (tritonserver.InvalidArgumentError, tritonserver.NotFoundError, tritonserver.UnsupportedError,
                tritonserver.UnavailableError, tritonserver.InternalError, tritonserver.UnknownError,
                tritonserver.AlreadyExistsError, tritonserver.CancelledError):
        assert issubclass(cls, tritonserver.TritonError)
