"""Property-based round trips through the C++ identity backend: for every
numeric Triton type NumPy has (BOOL, UINT8..64, INT8..64, FP16, FP32, FP64),
any shape of rank 1 to 4 (zeros included) and any memory layout (C order,
Fortran order, sliced with steps, negative strides, transposed, broadcast,
read-only), handed over as a NumPy array, a Tensor or a bare DLPack object,
the output is the input bit for bit, and the input is left untouched.

One identity model per (type, rank) is loaded from memory on first use
(Triton checks the rank against the configuration)."""

from __future__ import annotations

import json
import math
import traceback

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tritonserver
from tritonserver import Tensor
from common import DLPackOnly, as_numpy, call_with_deadline, single

HANG_S = 60

NUMPY_TO_TRITON = {
    numpy.bool_: "BOOL",
    numpy.uint8: "UINT8",
    numpy.uint16: "UINT16",
    numpy.uint32: "UINT32",
    numpy.uint64: "UINT64",
    numpy.int8: "INT8",
    numpy.int16: "INT16",
    numpy.int32: "INT32",
    numpy.int64: "INT64",
    numpy.float16: "FP16",
    numpy.float32: "FP32",
    numpy.float64: "FP64",
}
LAYOUTS = ["c", "fortran", "sliced", "negative_strides", "transposed", "broadcast"]

_models: dict[str, tritonserver.Model] = {}


@pytest.fixture(scope="module", autouse=True)
def unload_property_models(server):
    """The models loaded here leave the shared server with this module."""
    yield
    for name in list(_models):
        server.unload(name)
    _models.clear()


def identity_model(server: tritonserver.Server, triton_type: str, rank: int) -> tritonserver.Model:
    name = f"prop_identity_{triton_type.lower()}_r{rank}"
    if name not in _models:
        dims = [-1] * rank
        config = {
            "name": name,
            "backend": "identity",
            "max_batch_size": 0,
            "input": [{"name": "INPUT0", "data_type": f"TYPE_{triton_type}", "dims": dims}],
            "output": [{"name": "OUTPUT0", "data_type": f"TYPE_{triton_type}", "dims": dims}],
            "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        }
        # A version folder must exist; the identity backend reads no file.
        _models[name] = server.load(name, {"config": json.dumps(config), "file:1/unused": b""})
    return _models[name]


def raw_array(data, dtype, shape) -> numpy.ndarray:
    """A C-order array of `shape` whose bytes are arbitrary (every bit
    pattern: NaN payloads, -0.0, subnormals, BOOL bytes other than 0/1)."""
    itemsize = numpy.dtype(dtype).itemsize
    count = math.prod(shape)
    raw = data.draw(st.binary(min_size=count * itemsize, max_size=count * itemsize))
    return numpy.frombuffer(raw, dtype=numpy.uint8).view(dtype).reshape(shape).copy()


def make_layout(data, dtype, shape: list[int], layout: str) -> numpy.ndarray:
    if layout == "c":
        return raw_array(data, dtype, shape)
    if layout == "fortran":
        return numpy.asfortranarray(raw_array(data, dtype, shape))
    if layout == "sliced":
        steps = data.draw(st.lists(st.integers(1, 3), min_size=len(shape), max_size=len(shape)))
        offsets = data.draw(st.lists(st.integers(0, 2), min_size=len(shape), max_size=len(shape)))
        bigger = raw_array(data, dtype, [o + d * s for d, s, o in zip(shape, steps, offsets)])
        return bigger[tuple(slice(o, o + d * s, s) for d, s, o in zip(shape, steps, offsets))]
    if layout == "negative_strides":
        axes = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
        array = raw_array(data, dtype, shape)
        return array[tuple(slice(None, None, -1) if flip else slice(None) for flip in axes)]
    if layout == "transposed":
        order = data.draw(st.permutations(range(len(shape))))
        source = raw_array(data, dtype, [shape[k] for k in numpy.argsort(order)])
        return source.transpose(order)
    if layout == "broadcast":  # stride 0 along one axis
        axis = data.draw(st.integers(0, len(shape) - 1))
        narrow = list(shape)
        narrow[axis] = 1 if shape[axis] else 0
        return numpy.broadcast_to(raw_array(data, dtype, narrow), shape)
    raise AssertionError(layout)


def infer_once(m: tritonserver.Model, value, refusal: type | None = None):
    """The response to one request (the message, where it raised `refusal`). The
    locals of the finished frames of any exception are cleared first: a kept
    infer() exception holds its native request, which then stalls the
    shared server's stop() (docs/hostile_inputs.md, "Bugs")."""
    try:
        return call_with_deadline(lambda: single(m.infer(inputs={"INPUT0": value})), HANG_S)
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)
        if refusal is not None and isinstance(e, refusal):
            return str(e)
        raise


def as_bytes(array: numpy.ndarray) -> numpy.ndarray:
    return numpy.ascontiguousarray(array).reshape(-1).view(numpy.uint8)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), dtype=st.sampled_from(list(NUMPY_TO_TRITON)), rank=st.integers(1, 4),
       layout=st.sampled_from(LAYOUTS), read_only=st.booleans(), via=st.sampled_from(["array", "tensor", "dlpack"]))
def test_identity_output_equals_input_bit_for_bit(server, data, dtype, rank, layout, read_only, via):
    shape = data.draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank), label="shape")
    x = make_layout(data, dtype, shape, layout)
    if read_only and x.flags.writeable:
        x.flags.writeable = False
    assert x.shape == tuple(shape) and x.dtype == dtype
    before = as_bytes(x).copy()
    m = identity_model(server, NUMPY_TO_TRITON[dtype], rank)
    value = {"array": lambda: x, "tensor": lambda: Tensor.from_dlpack(x), "dlpack": lambda: DLPackOnly(x)}[via]()
    if via == "dlpack" and not x.flags.writeable:
        # NumPy < 2 refuses to export a read-only array through DLPack
        # (BufferError), so such an object is refused as a whole. (A NumPy
        # array, or a Tensor made from one, is read through the buffer protocol.)
        response = infer_once(m, value, refusal=tritonserver.InvalidArgumentError)
        if isinstance(response, str):
            assert "DLPack" in response, response
            return
    else:
        response = infer_once(m, value)
    out = response.outputs["OUTPUT0"]
    assert out.data_type == tritonserver.DataType[NUMPY_TO_TRITON[dtype]]
    assert list(out.shape) == shape
    got = as_numpy(out)
    assert got.dtype == x.dtype and got.shape == x.shape
    numpy.testing.assert_array_equal(as_bytes(got), before)
    numpy.testing.assert_array_equal(as_bytes(x), before)  # the input is never written


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(st.binary(max_size=40) | st.text(max_size=10), max_size=12),
       layout=st.sampled_from(["c", "reversed", "step2"]))
def test_identity_bytes_round_trip(model, items, layout):
    array = numpy.empty(len(items) * 2, dtype=object)
    array[:] = items + items[::-1]
    view = {"c": array[: len(items)], "reversed": array[len(items):][::-1], "step2": array[::2]}[layout]
    expected = [i.encode("utf-8") if isinstance(i, str) else i for i in view.tolist()]
    response = call_with_deadline(lambda: single(model("identity_bytes").infer(inputs={"INPUT0": view})), HANG_S)
    assert response.outputs["OUTPUT0"].to_bytes_array().tolist() == expected
