"""A Tensor whose fields were changed after it was made cannot make a
consumer read memory it does not own.

Tensor and MemoryBuffer are plain (mutable) dataclasses, as officially.
Every export checks, before a pointer leaves the package, that the shape's
elements fit in the buffer's bytes, that the buffer lies in its owner's
memory and that a non-empty buffer's pointer is not null (ValueError)."""

from __future__ import annotations

import re

import numpy
import pytest

from tritonserver import DataType, InvalidArgumentError, MemoryBuffer, MemoryType, Tensor
from common import refused


@pytest.fixture
def output(model) -> Tensor:
    """A 4-element FP32 output of identity_fp32 (16 bytes)."""
    responses = list(model("identity_fp32").infer(inputs={"INPUT0": numpy.arange(4, dtype=numpy.float32)}))
    return responses[0].outputs["OUTPUT0"]


def test_grown_shape_is_not_exported(output: Tensor) -> None:
    output.shape = [1 << 20]
    with refused(ValueError, r"needs 4194304 bytes, its buffer holds 16"):
        numpy.from_dlpack(output)
    with refused(ValueError):
        numpy.asarray(output)


def test_wider_data_type_is_not_exported(output: Tensor) -> None:
    output.data_type = DataType.FP64
    with refused(ValueError, r"64-bit elements: it needs 32 bytes, its buffer holds 16"):
        numpy.from_dlpack(output)


def test_shape_past_2_64_is_not_exported(output: Tensor) -> None:
    output.shape = [1 << 62, 1 << 62]
    with refused(ValueError, r"more than 2\^64"):
        numpy.from_dlpack(output)


def test_negative_dimension_is_not_exported(output: Tensor) -> None:
    output.shape = [-4]
    with refused(ValueError, r"negative dimension"):
        numpy.from_dlpack(output)


def test_narrower_view_still_exports(output: Tensor) -> None:
    output.shape = [2]  # fewer elements than the buffer holds: safe
    assert numpy.from_dlpack(output).tolist() == [0.0, 1.0]


def test_grown_buffer_size_is_not_exported(output: Tensor) -> None:
    output.memory_buffer.size = 1 << 20  # more than the native buffer holds
    output.shape = [1 << 18]
    with refused(ValueError, r"outside the memory of its owner"):
        numpy.from_dlpack(output)


def test_null_pointer_is_not_exported() -> None:
    tensor = Tensor(DataType.FP32, [4], MemoryBuffer(0, MemoryType.CPU, 0, 16, None))
    with refused(ValueError, r"data_ptr is null"):
        numpy.from_dlpack(tensor)


def test_empty_tensor_with_null_pointer_exports() -> None:
    tensor = Tensor(DataType.FP32, [0], MemoryBuffer(0, MemoryType.CPU, 0, 0, None))
    assert numpy.from_dlpack(tensor).shape == (0,)


def test_negative_size_is_refused(model) -> None:
    data = numpy.arange(4, dtype=numpy.float32)
    tensor = Tensor.from_dlpack(data)
    tensor.memory_buffer.size = -1
    with refused(ValueError, r"MemoryBuffer.size must not be negative"):
        numpy.from_dlpack(tensor)
    with refused(InvalidArgumentError, r"MemoryBuffer.size must not be negative"):
        model("identity_fp32").infer(inputs={"INPUT0": tensor})


def test_bytes_output_with_grown_size_is_not_read(model) -> None:
    responses = list(model("identity_bytes").infer(inputs={"INPUT0": numpy.array([b"ab", b"c"], dtype=object)}))
    tensor = responses[0].outputs["OUTPUT0"]
    assert tensor.to_bytes_array().tolist() == [b"ab", b"c"]
    tensor.memory_buffer.size += 1 << 20
    with refused(ValueError, r"outside the memory of its owner"):
        tensor.to_bytes_array()


# -- fields of the wrong kind (inputs and exports) ------------------------------------
BAD_SHAPES = [
    pytest.param("4", TypeError, r"Tensor.shape must be a list of ints, not str \('4'\)", id="str"),
    pytest.param([4.7], TypeError, r"Tensor.shape must be a list of ints, not \[4.7\] \(the dimension 4.7 is a float\)",
                 id="float"),
    pytest.param([True, 4], TypeError, r"Tensor.shape must be a list of ints, not \[True, 4\] \(the dimension True is a bool\)",
                 id="bool"),
    pytest.param(4, TypeError, r"Tensor.shape must be a list of ints, not int", id="int"),
    pytest.param([-16], ValueError, r"Tensor.shape \[-16\] has a negative dimension \(-16\)", id="negative"),
]


@pytest.mark.parametrize("shape, kind, message", BAD_SHAPES)
def test_bad_shape_is_refused_naming_the_field(model, shape, kind, message) -> None:
    # Was: int() made '4' and [4.7] a shape of [4] (the tensor was sent or
    # exported as if that were meant), and [-16] reached the core, whose
    # "Expected -16, got 16" named no field.
    data = numpy.arange(16, dtype=numpy.float32)
    tensor = Tensor(DataType.FP32, shape, MemoryBuffer.from_dlpack(data))
    with refused(kind, r"input 'INPUT0': " + message):
        model("identity_fp32").infer(inputs={"INPUT0": tensor})
    with refused(kind, r"cannot export this Tensor: " + message):
        numpy.from_dlpack(tensor)
    # A shape of NumPy integers (array.shape of another array) is fine.
    tensor.shape = numpy.array([16])
    responses = list(model("identity_fp32").infer(inputs={"INPUT0": tensor}))
    assert numpy.from_dlpack(responses[0].outputs["OUTPUT0"]).tolist() == data.tolist()


@pytest.mark.parametrize("memory_type", [7, -1, "cpu", 1.0])
def test_unknown_memory_type_is_refused_naming_the_field(model, memory_type) -> None:
    # Was: anything but GPU (2) was taken as host memory, so
    # MemoryBuffer(memory_type=7) was read as CPU memory.
    data = numpy.arange(4, dtype=numpy.float32)
    buffer = MemoryBuffer(data.ctypes.data, memory_type, 0, data.nbytes, data)
    tensor = Tensor(DataType.FP32, [4], buffer)
    message = r"MemoryBuffer.memory_type must be a MemoryType \(CPU, CPU_PINNED or GPU\), not " + re.escape(
        repr(memory_type))
    with refused(InvalidArgumentError, r"input 'INPUT0': " + message):
        model("identity_fp32").infer(inputs={"INPUT0": tensor})
    with refused(ValueError, r"cannot export this Tensor: " + message):
        numpy.from_dlpack(tensor)
    # A plain int of a MemoryType is accepted, as officially.
    buffer.memory_type = 0
    responses = list(model("identity_fp32").infer(inputs={"INPUT0": tensor}))
    assert numpy.from_dlpack(responses[0].outputs["OUTPUT0"]).tolist() == data.tolist()
