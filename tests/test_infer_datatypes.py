"""Every Triton data type through real models: echo_all_types (python
backend) for the NumPy types and BYTES, identity_bf16 for BF16 (NumPy has no
bfloat16), identity_fp32 for a 64 MiB tensor, identity_multi for shapes of
several ranks; Python lists and scalars as inputs; output_names subsets.

Zero-size tensors are in test_zero_copy.py (they are also a buffer-lifetime
matter).
"""

from __future__ import annotations

import numpy
import pytest

import tritonserver
from tritonserver import DataType, MemoryBuffer, MemoryType, Tensor
from common import as_numpy, single
from test_tensor_dlpack import address, describe_capsule

NUMERIC = {
    "BOOL": numpy.bool_,
    "UINT8": numpy.uint8,
    "UINT16": numpy.uint16,
    "UINT32": numpy.uint32,
    "UINT64": numpy.uint64,
    "INT8": numpy.int8,
    "INT16": numpy.int16,
    "INT32": numpy.int32,
    "INT64": numpy.int64,
    "FP16": numpy.float16,
    "FP32": numpy.float32,
    "FP64": numpy.float64,
}


def sample(dtype) -> numpy.ndarray:
    """Values that exercise the whole range of `dtype`, extremes included."""
    dtype = numpy.dtype(dtype)
    if dtype == numpy.bool_:
        return numpy.array([True, False, False, True, True])
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        middle = list(range(-3, 4)) if dtype.kind == "i" else list(range(0, 7))
        values = [int(info.min), int(info.max), *middle, int(info.max) - 1, int(info.min) + 1]
        return numpy.array(values, dtype=dtype)
    info = numpy.finfo(dtype)
    with numpy.errstate(over="ignore"):
        return numpy.array(
            [0.0, -0.0, 1.5, -2.25, info.max, info.min, info.tiny, info.eps, numpy.inf, -numpy.inf, numpy.nan],
            dtype=dtype,
        )


def assert_bit_equal(actual: numpy.ndarray, expected: numpy.ndarray) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    # Bit patterns, so -0.0 and NaN are checked exactly too.
    as_bytes = numpy.ascontiguousarray(actual).view(numpy.uint8)
    numpy.testing.assert_array_equal(as_bytes, numpy.ascontiguousarray(expected).view(numpy.uint8))


@pytest.mark.parametrize("type_name", list(NUMERIC))
def test_numeric_type_round_trip(model, type_name):
    data = sample(NUMERIC[type_name])
    response = single(model("echo_all_types").infer(inputs={f"IN_{type_name}": data}))
    assert response.error is None
    assert list(response.outputs) == [f"OUT_{type_name}"]
    out = response.outputs[f"OUT_{type_name}"]
    assert out.data_type == DataType[type_name]
    assert list(out.shape) == [len(data)]
    assert out.size == data.nbytes
    assert out.memory_type == MemoryType.CPU
    assert_bit_equal(as_numpy(out), data)
    assert_bit_equal(numpy.asarray(out), data)
    if data.dtype.kind in "iu":  # the extremes really were sent
        assert as_numpy(out).tolist()[:2] == [int(numpy.iinfo(data.dtype).min), int(numpy.iinfo(data.dtype).max)]


def test_all_types_in_one_request(model):
    inputs = {f"IN_{name}": sample(dtype) for name, dtype in NUMERIC.items()}
    strings = numpy.array([b"", b"\x00\xff", "ünïcödé".encode()], dtype=numpy.object_)
    inputs["IN_STRING"] = strings
    response = single(model("echo_all_types").infer(inputs=inputs))
    assert sorted(response.outputs) == sorted(f"OUT_{name}" for name in [*NUMERIC, "STRING"])
    for name, dtype in NUMERIC.items():
        out = response.outputs[f"OUT_{name}"]
        assert out.data_type == DataType[name]
        assert_bit_equal(as_numpy(out), inputs[f"IN_{name}"])
    out = response.outputs["OUT_STRING"]
    assert out.data_type == DataType.BYTES
    assert out.to_bytes_array().tolist() == strings.tolist()


# -- BYTES ------------------------------------------------------------------------
RAW = [b"", b"plain", b"\xff\xfe\xfd", b"\x00mid\x00null", b"", "日本語".encode(), bytes(range(256))]


@pytest.mark.parametrize("model_name, input_name, output_name",
                         [("echo_all_types", "IN_STRING", "OUT_STRING"),
                          ("identity_bytes", "INPUT0", "OUTPUT0")])
@pytest.mark.parametrize("container", ["list", "object_array", "fixed_bytes_array"])
def test_bytes_round_trip_with_empty_and_non_utf8(model, model_name, input_name, output_name, container):
    if container == "list":
        value = list(RAW)
    elif container == "object_array":
        value = numpy.array(RAW, dtype=numpy.object_)
    else:
        # NumPy's fixed-width "S" type strips trailing NUL bytes by design.
        value = numpy.array([b"", b"abc", b"\xff\x80", b""], dtype=numpy.bytes_)
    expected = [bytes(v) for v in (value.tolist() if isinstance(value, numpy.ndarray) else value)]
    response = single(model(model_name).infer(inputs={input_name: value}))
    out = response.outputs[output_name]
    assert out.data_type == DataType.BYTES
    assert list(out.shape) == [len(expected)]
    decoded = out.to_bytes_array()
    assert decoded.dtype == numpy.object_
    assert decoded.shape == (len(expected),)
    assert decoded.tolist() == expected
    assert all(type(item) is bytes for item in decoded.tolist())
    with pytest.raises(UnicodeDecodeError):
        out.to_string_array()  # \xff... is not UTF-8


@pytest.mark.parametrize("model_name, input_name, output_name",
                         [("echo_all_types", "IN_STRING", "OUT_STRING"),
                          ("identity_bytes", "INPUT0", "OUTPUT0")])
def test_strings_round_trip_as_utf8(model, model_name, input_name, output_name):
    strings = ["héllo", "", "日本語テキスト", "emoji 🎉", "ascii", "Ωmega\u0000x"]
    response = single(model(model_name).infer(inputs={input_name: strings}))
    out = response.outputs[output_name]
    assert out.data_type == DataType.BYTES
    assert out.to_bytes_array().tolist() == [s.encode("utf-8") for s in strings]
    as_text = out.to_string_array()
    assert as_text.shape == (len(strings),)
    assert as_text.tolist() == strings


@pytest.mark.parametrize("value", [[b"ab\x00", b"c"], ["ab\x00", "c"], (b"\x00",), b"tail\x00"],
                         ids=["bytes_list", "str_list", "tuple", "scalar"])
def test_trailing_nul_bytes_of_lists_and_scalars_are_sent_whole(model, value):
    """A list, tuple or scalar of bytes/str is sent as given: NumPy's
    fixed-width types (what numpy.asarray makes of them) would drop
    trailing NULs without a word."""
    def encoded(v):
        return [encoded(x) for x in v] if isinstance(v, (list, tuple)) else (v.encode() if isinstance(v, str) else v)

    expected = numpy.array(encoded(value), dtype=numpy.object_)
    out = Tensor.from_bytes_array(value)
    assert out.to_bytes_array().tolist() == expected.tolist()
    if expected.ndim == 1:  # the model takes [-1]
        for given in (value, out):
            out = single(model("identity_bytes").infer(inputs={"INPUT0": given})).outputs["OUTPUT0"]
            assert out.to_bytes_array().tolist() == expected.tolist()
    if any(b.endswith(b"\x00") for b in expected.reshape(-1)):
        with pytest.raises(ValueError, match="ends with a NUL character.*to_bytes_array"):
            out.to_string_array()


def test_bytes_tensor_from_string_array(model):
    tensor = Tensor.from_string_array(numpy.array(["a", "bé", ""], dtype=numpy.str_))
    assert tensor.data_type == DataType.BYTES
    response = single(model("identity_bytes").infer(inputs={"INPUT0": tensor}))
    assert response.outputs["OUTPUT0"].to_string_array().tolist() == ["a", "bé", ""]
    with pytest.raises(tritonserver.InvalidArgumentError):
        Tensor.from_bytes_array(numpy.arange(3))
    with pytest.raises(tritonserver.InvalidArgumentError, match="BYTES"):
        Tensor.from_dlpack(numpy.arange(3)).to_bytes_array()


def test_identity_bytes_of_many_elements(model):
    items = [(b"%d-" % i) * (i % 7) for i in range(5000)]
    response = single(model("identity_bytes").infer(inputs={"INPUT0": items}))
    assert response.outputs["OUTPUT0"].to_bytes_array().tolist() == items


# -- BF16 -------------------------------------------------------------------------
def bf16_bits(values: numpy.ndarray) -> numpy.ndarray:
    """Truncate float32 values to bfloat16 bit patterns (exact for these)."""
    return (numpy.asarray(values, dtype=numpy.float32).view(numpy.uint32) >> 16).astype(numpy.uint16)


def test_identity_bf16_round_trip(model):
    floats = numpy.array([0.0, 1.0, -2.5, 3.140625, 65280.0, 1e-38, -numpy.inf, numpy.inf], dtype=numpy.float32)
    bits = bf16_bits(floats)
    tensor = Tensor(DataType.BF16, list(bits.shape), MemoryBuffer.from_dlpack(bits))
    assert tensor.data_ptr == address(bits) and tensor.size == bits.nbytes
    response = single(model("identity_bf16").infer(inputs={"INPUT0": tensor}))
    out = response.outputs["OUTPUT0"]
    assert out.data_type == DataType.BF16
    assert list(out.shape) == [len(bits)]
    assert out.size == bits.nbytes
    as_uint16 = Tensor(DataType.UINT16, out.shape, out.memory_buffer)
    got = numpy.from_dlpack(as_uint16)
    numpy.testing.assert_array_equal(got, bits)
    assert address(got) == out.data_ptr
    widened = (got.astype(numpy.uint32) << 16).view(numpy.float32)
    numpy.testing.assert_array_equal(widened[:-3], floats[:-3])
    assert numpy.isinf(widened[-2:]).all()


def test_identity_bf16_output_exports_as_bfloat16(model):
    bits = bf16_bits(numpy.linspace(-4, 4, 9, dtype=numpy.float32))
    tensor = Tensor(DataType.BF16, [3, 3], MemoryBuffer.from_dlpack(bits))
    model_input = Tensor(DataType.BF16, [9], tensor.memory_buffer)
    out = single(model("identity_bf16").infer(inputs={"INPUT0": model_input})).outputs["OUTPUT0"]
    for capsule in (out.__dlpack__(), out.__dlpack__(max_version=(1, 0))):
        info = describe_capsule(capsule)
        assert info["dtype"] == (4, 16, 1)  # kDLBfloat, 16 bits, 1 lane
        assert info["data"] == out.data_ptr
        assert info["shape"] == [9]
    # A DLPack consumer that knows bfloat16: our own Tensor.from_dlpack.
    again = Tensor.from_dlpack(out)
    assert again.data_type == DataType.BF16
    assert again.data_ptr == out.data_ptr
    assert list(again.shape) == [9]
    # ... and it can go back into a model as it is.
    echoed = single(model("identity_bf16").infer(inputs={"INPUT0": again})).outputs["OUTPUT0"]
    numpy.testing.assert_array_equal(
        numpy.from_dlpack(Tensor(DataType.UINT16, echoed.shape, echoed.memory_buffer)), bits)


# -- large and multi-dimensional ------------------------------------------------------
def test_identity_fp32_64_mib(model):
    count = 64 * 1024 * 1024 // 4
    data = numpy.arange(count, dtype=numpy.float32)
    data[::4097] = -1.25
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    out = response.outputs["OUTPUT0"]
    assert out.size == 64 * 1024 * 1024
    assert list(out.shape) == [count]
    result = as_numpy(out)
    assert address(result) == out.data_ptr
    assert numpy.array_equal(result, data)
    del result, out, response


@pytest.mark.parametrize("shapes", [((2, 3), (4, 1, 5), (7,)), ((1, 1), (1, 1, 1), (1,)), ((16, 2), (2, 8, 3), (3,))])
def test_identity_multi_shapes_and_types(model, shapes):
    rng = numpy.random.default_rng(sum(map(sum, shapes)))
    inputs = {
        "INPUT0": rng.integers(-128, 128, size=shapes[0]).astype(numpy.int8),
        "INPUT1": rng.standard_normal(shapes[1]).astype(numpy.float16),
        "INPUT2": rng.integers(0, 2**64 - 1, size=shapes[2], dtype=numpy.uint64, endpoint=True),
    }
    response = single(model("identity_multi").infer(inputs=inputs))
    assert sorted(response.outputs) == ["OUTPUT0", "OUTPUT1", "OUTPUT2"]
    for k, expected_type in enumerate([DataType.INT8, DataType.FP16, DataType.UINT64]):
        out = response.outputs[f"OUTPUT{k}"]
        assert out.data_type == expected_type
        assert tuple(out.shape) == shapes[k]
        result = as_numpy(out)
        assert result.shape == shapes[k]
        assert_bit_equal(result, inputs[f"INPUT{k}"])


# -- Python values as inputs -------------------------------------------------------------
@pytest.mark.parametrize(
    "name, value, dtype",
    [
        ("FP64", [1.5, -2.25, 1e300, 0.1], numpy.float64),
        ("FP64", [1, 2.5], numpy.float64),  # mixed int/float is FP64
        ("INT64", [0, -1, 2**62, -(2**63), 2**63 - 1], numpy.int64),
        ("BOOL", [True, False, True], numpy.bool_),
    ],
)
def test_python_lists_as_inputs(model, name, value, dtype):
    response = single(model("echo_all_types").infer(inputs={f"IN_{name}": value}))
    out = response.outputs[f"OUT_{name}"]
    assert out.data_type == DataType[name]
    result = as_numpy(out)
    assert result.dtype == numpy.dtype(dtype)
    assert result.tolist() == [dtype(v).item() for v in value]


def test_python_list_of_str_and_bytes_is_bytes(model):
    response = single(model("echo_all_types").infer(inputs={"IN_STRING": ["ab", "", "ç"]}))
    assert response.outputs["OUT_STRING"].to_bytes_array().tolist() == [b"ab", b"", "ç".encode()]
    response = single(model("echo_all_types").infer(inputs={"IN_STRING": [b"\xff", b""]}))
    assert response.outputs["OUT_STRING"].to_bytes_array().tolist() == [b"\xff", b""]


def test_python_tuple_is_accepted_like_a_list(model):
    response = single(model("echo_all_types").infer(inputs={"IN_INT64": (3, 4, 5)}))
    assert as_numpy(response.outputs["OUT_INT64"]).tolist() == [3, 4, 5]


@pytest.mark.parametrize(
    "value, data_type",
    [(2.5, DataType.FP64), (7, DataType.INT64), (True, DataType.BOOL), (False, DataType.BOOL),
     ("text", DataType.BYTES), (b"raw", DataType.BYTES), (numpy.float32(1.5), DataType.FP32),
     (numpy.int16(3), DataType.INT16)],
)
def test_python_scalars_become_zero_dim_tensors(value, data_type):
    tensor = Tensor._from_object(value)
    assert tensor.data_type == data_type
    assert list(tensor.shape) == []
    if data_type != DataType.BYTES:
        result = numpy.from_dlpack(tensor)
        assert result.shape == ()
        assert result.item() == value


@pytest.mark.parametrize("value, name", [(2.5, "FP64"), (7, "INT64"), (True, "BOOL")])
def test_python_scalar_input_reaches_the_core(model, value, name):
    # echo_all_types takes dims [-1]: a 0-d scalar is refused by the core with
    # a clear shape error (synchronously), and in a list it works.
    with pytest.raises(tritonserver.InvalidArgumentError, match="shape"):
        model("echo_all_types").infer(inputs={f"IN_{name}": value})
    response = single(model("echo_all_types").infer(inputs={f"IN_{name}": [value]}))
    out = response.outputs[f"OUT_{name}"]
    assert out.data_type == DataType[name]
    assert as_numpy(out).tolist() == [value]


# -- output_names ---------------------------------------------------------------------------
def test_output_names_subset_python_backend(model):
    a = numpy.array([1.0, 2.0, 3.0], dtype=numpy.float32)
    b = numpy.array([0.5, 0.25, 4.0], dtype=numpy.float32)
    response = single(model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}, output_names=["OUTPUT1"]))
    assert list(response.outputs) == ["OUTPUT1"]
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), a - b)
    response = single(model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}))
    assert sorted(response.outputs) == ["OUTPUT0", "OUTPUT1"]
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), a + b)


@pytest.mark.parametrize("names", [["OUTPUT2"], ["OUTPUT0", "OUTPUT1"], ["OUTPUT1", "OUTPUT2", "OUTPUT0"]])
def test_identity_output_names_subset(model, names):
    inputs = {
        "INPUT0": numpy.arange(6, dtype=numpy.int8).reshape(2, 3),
        "INPUT1": numpy.ones((1, 2, 2), dtype=numpy.float16),
        "INPUT2": numpy.array([9, 8], dtype=numpy.uint64),
    }
    request = model("identity_multi").create_request(inputs=inputs, output_names=names)
    response = single(model("identity_multi").infer(request))
    assert sorted(response.outputs) == sorted(names)
    for name in names:
        numpy.testing.assert_array_equal(as_numpy(response.outputs[name]), inputs[name.replace("OUT", "IN")])


def test_identity_unknown_output_name_is_rejected(model):
    with pytest.raises(tritonserver.InvalidArgumentError, match="NOPE"):
        model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_names=["NOPE"])
    response = single(model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), numpy.ones(2, numpy.float32))
