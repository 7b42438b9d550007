"""Tensor <-> DLPack: capsules (legacy and versioned), devices, reference
counting, shapes fixed at export, BYTES refusal, imports that share memory.

The capsule contents are read with ctypes (``describe_capsule``), so the
exported DLTensor itself is checked, not only what a consumer makes of it.
"""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy
import pytest

import tritonserver
from tritonserver import DataType, MemoryType, Tensor
from common import address, assert_no_live_buffers, has_gpu, hooks, single


# -- reading a capsule with ctypes ---------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_GetName = ctypes.pythonapi.PyCapsule_GetName
_GetName.restype = ctypes.c_char_p
_GetName.argtypes = [ctypes.py_object]
_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype = ctypes.c_void_p
_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule) -> str:
    return _GetName(capsule).decode()


def describe_capsule(capsule) -> dict:
    """What an (unconsumed) DLPack capsule describes. The capsule keeps its
    name, so its destructor still releases the export."""
    name = capsule_name(capsule)
    pointer = _GetPointer(capsule, name.encode())
    info = {"name": name}
    if name == "dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(pointer)
        info["version"] = (managed.version.major, managed.version.minor)
        info["flags"] = managed.flags
    else:
        assert name == "dltensor", name
        managed = _DLManagedTensor.from_address(pointer)
    t = managed.dl_tensor
    info.update(
        data=t.data or 0,
        device=(t.device.device_type, t.device.device_id),
        ndim=t.ndim,
        dtype=(t.dtype.code, t.dtype.bits, t.dtype.lanes),
        shape=[t.shape[i] for i in range(t.ndim)],
        strides=None if not t.strides else [t.strides[i] for i in range(t.ndim)],
        byte_offset=t.byte_offset,
    )
    return info



@pytest.fixture
def output(model):
    """An FP32 output of identity_fp32: [0, 0.5, ..., 5.5], shape [12]."""
    data = numpy.arange(12, dtype=numpy.float32) / 2
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    tensor = response.outputs["OUTPUT0"]
    yield tensor
    del tensor, response


# -- export -----------------------------------------------------------------
def test_identity_dlpack_legacy_capsule_describes_the_output(output):
    capsule = output.__dlpack__()
    info = describe_capsule(capsule)
    assert info["name"] == "dltensor"
    assert info["data"] == output.data_ptr
    assert info["device"] == (1, 0)
    assert info["dtype"] == (2, 32, 1)  # kDLFloat, 32 bits, 1 lane
    assert info["ndim"] == 1 and info["shape"] == [12]
    assert info["strides"] == [1]  # DLPack 1.2: strides are never NULL for ndim > 0
    assert info["byte_offset"] == 0


@pytest.mark.parametrize("shape, strides", [([2, 3, 4], [12, 4, 1]), ([5, 1], [1, 1]), ([3, 0, 2], [2, 2, 1]),
                                            ([], None)])
@pytest.mark.parametrize("max_version", [None, (1, 2)])
def test_dlpack_export_gives_c_order_strides(shape, strides, max_version):
    array = numpy.zeros(shape, dtype=numpy.float32)
    tensor = Tensor.from_dlpack(array)
    info = describe_capsule(tensor.__dlpack__(max_version=max_version))
    assert info["shape"] == shape
    assert info["strides"] == strides  # in elements; a 0-d tensor has none
    back = numpy.from_dlpack(tensor)
    assert back.shape == tuple(shape)
    if array.size:
        assert back.strides == array.strides


@pytest.mark.parametrize("max_version", [(1, 0), (1, 1), (2, 0)])
def test_identity_dlpack_versioned_capsule_when_asked(output, max_version):
    capsule = output.__dlpack__(max_version=max_version)
    info = describe_capsule(capsule)
    assert info["name"] == "dltensor_versioned"
    assert info["version"][0] == 1 and info["version"] <= tuple(max_version)
    assert info["data"] == output.data_ptr
    assert info["dtype"] == (2, 32, 1)
    assert info["shape"] == [12]


def test_identity_dlpack_old_max_version_gets_legacy_capsule(output):
    assert capsule_name(output.__dlpack__(max_version=(0, 8))) == "dltensor"


def test_identity_dlpack_device_of_cpu_output(output):
    assert output.memory_type == MemoryType.CPU
    assert output.__dlpack_device__() == (1, 0)
    assert tuple(int(v) for v in output.__dlpack_device__()) == (
        int(tritonserver.DLDeviceType.kDLCPU), 0)


def test_identity_dlpack_keyword_arguments_of_the_standard(output):
    # dl_device equal to the tensor's own device and copy=False are fine.
    numpy.testing.assert_array_equal(
        numpy.from_dlpack(output), numpy.arange(12, dtype=numpy.float32) / 2)
    assert describe_capsule(output.__dlpack__(dl_device=(1, 0), copy=False))["data"] == output.data_ptr
    assert describe_capsule(output.__dlpack__(stream=None))["data"] == output.data_ptr
    # A copy or another device cannot be honoured without copying: BufferError
    # (what the array API standard prescribes).
    with pytest.raises(BufferError):
        output.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        output.__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("stream", [1, 2, -1, 0, 12345, "default", True], ids=repr)
def test_identity_dlpack_stream_on_host_memory_must_be_none(output, stream):
    # The array API standard: for devices without streams (CPU) only None.
    with pytest.raises(BufferError):
        output.__dlpack__(stream=stream)


def _output_of(model):
    data = numpy.arange(12, dtype=numpy.float32) / 2
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    return response, response.outputs["OUTPUT0"]


def test_identity_dlpack_export_holds_the_native_buffer_not_the_tensor(model):
    # One owner per export: the capsule of an output holds its native buffer
    # (freed by the consumer's deleter without the GIL), not the Tensor.
    response, tensor = _output_of(model)
    gc.collect()
    base = sys.getrefcount(tensor)
    first = numpy.from_dlpack(tensor)
    second = numpy.from_dlpack(tensor)
    assert sys.getrefcount(tensor) == base
    pointer = tensor.data_ptr
    assert address(first) == address(second) == pointer
    del tensor, response
    gc.collect()
    assert pointer in hooks().live_buffer_addresses()
    del first
    gc.collect()
    assert pointer in hooks().live_buffer_addresses()
    numpy.testing.assert_array_equal(second, numpy.arange(12, dtype=numpy.float32) / 2)
    del second
    assert_no_live_buffers()


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_identity_dlpack_unconsumed_capsule_releases_its_buffer(model, max_version):
    response, tensor = _output_of(model)
    capsule = tensor.__dlpack__(max_version=max_version)
    pointer = tensor.data_ptr
    del tensor, response
    gc.collect()
    assert pointer in hooks().live_buffer_addresses()
    del capsule
    assert_no_live_buffers()


def test_dlpack_export_of_a_foreign_owner_holds_it_until_the_consumer_goes():
    array = numpy.arange(6, dtype=numpy.float32)
    tensor = Tensor.from_dlpack(array)
    gc.collect()
    base = sys.getrefcount(array)
    view = numpy.from_dlpack(tensor)
    assert sys.getrefcount(array) == base + 1
    capsule = tensor.__dlpack__(max_version=(1, 0))
    assert sys.getrefcount(array) == base + 2
    del view, capsule
    gc.collect()
    assert sys.getrefcount(array) == base


def test_identity_dlpack_array_keeps_its_export_shape(output):
    before = numpy.from_dlpack(output)
    assert before.shape == (12,)
    output.shape = [3, 4]
    assert before.shape == (12,)
    after = numpy.from_dlpack(output)
    assert after.shape == (3, 4)
    assert address(after) == address(before) == output.data_ptr
    numpy.testing.assert_array_equal(after.reshape(-1), before)
    # The capsule copied the shape: changing it again changes nothing exported.
    capsule = output.__dlpack__()
    output.shape = [12]
    assert describe_capsule(capsule)["shape"] == [3, 4]
    assert before.shape == (12,) and after.shape == (3, 4)


def test_identity_dlpack_array_survives_the_tensor_and_response(model):
    data = numpy.linspace(-1, 1, 257, dtype=numpy.float32)
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    tensor = response.outputs["OUTPUT0"]
    array = numpy.from_dlpack(tensor)
    del tensor, response
    gc.collect()
    numpy.testing.assert_array_equal(array, data)
    del array
    assert_no_live_buffers()


def test_bytes_tensor_refuses_dlpack_with_a_clear_error(model):
    response = single(model("identity_bytes").infer(inputs={"INPUT0": [b"ab", b"c"]}))
    tensor = response.outputs["OUTPUT0"]
    assert tensor.data_type == DataType.BYTES
    gc.collect()
    base = sys.getrefcount(tensor)
    with pytest.raises(tritonserver.InvalidArgumentError, match="BYTES"):
        tensor.__dlpack__()
    with pytest.raises(tritonserver.InvalidArgumentError, match="BYTES"):
        tensor.__dlpack__(max_version=(1, 0))
    with pytest.raises(Exception):
        numpy.from_dlpack(tensor)
    # The supported way still works, and the failed exports leaked nothing.
    assert tensor.to_bytes_array().tolist() == [b"ab", b"c"]
    assert list(numpy.asarray(tensor)) == [b"ab", b"c"]
    gc.collect()
    assert sys.getrefcount(tensor) == base


def test_bytes_tensor_from_input_refuses_dlpack():
    tensor = Tensor.from_bytes_array([b"x", b"yz"])
    assert tensor.data_type == DataType.BYTES
    with pytest.raises(tritonserver.InvalidArgumentError):
        tensor.__dlpack__()


# -- import -----------------------------------------------------------------
def test_from_dlpack_of_numpy_shares_memory_and_holds_owner():
    array = numpy.arange(6, dtype=numpy.int16).reshape(2, 3)
    gc.collect()
    base = sys.getrefcount(array)
    tensor = Tensor.from_dlpack(array)
    assert tensor.data_type == DataType.INT16
    assert list(tensor.shape) == [2, 3]
    assert tensor.memory_type == MemoryType.CPU and tensor.memory_type_id == 0
    assert tensor.data_ptr == address(array)
    assert tensor.size == array.nbytes
    assert tensor.memory_buffer.owner is array
    assert sys.getrefcount(array) == base + 1
    view = numpy.from_dlpack(tensor)
    assert address(view) == address(array)
    array[1, 2] = 99  # a write through the source is seen through the export
    assert view[1, 2] == 99
    del view, tensor
    gc.collect()
    assert sys.getrefcount(array) == base


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (numpy.bool_, DataType.BOOL), (numpy.uint8, DataType.UINT8), (numpy.uint16, DataType.UINT16),
        (numpy.uint32, DataType.UINT32), (numpy.uint64, DataType.UINT64), (numpy.int8, DataType.INT8),
        (numpy.int16, DataType.INT16), (numpy.int32, DataType.INT32), (numpy.int64, DataType.INT64),
        (numpy.float16, DataType.FP16), (numpy.float32, DataType.FP32), (numpy.float64, DataType.FP64),
    ],
)
def test_from_dlpack_maps_every_numpy_type_and_back(dtype, expected):
    array = numpy.arange(5).astype(dtype)
    tensor = Tensor.from_dlpack(array)
    assert tensor.data_type == expected
    back = numpy.from_dlpack(tensor)
    assert back.dtype == numpy.dtype(dtype)
    assert address(back) == address(array)
    numpy.testing.assert_array_equal(back, array)


def test_from_dlpack_of_a_tensor_shares_memory(output):
    again = Tensor.from_dlpack(output)
    assert again.data_ptr == output.data_ptr
    assert again.data_type == output.data_type
    assert list(again.shape) == list(output.shape)
    assert again.memory_type == MemoryType.CPU


def test_from_dlpack_non_contiguous_host_array_is_copied_correctly():
    base = numpy.arange(20, dtype=numpy.float32)
    view = base[::-3]
    tensor = Tensor.from_dlpack(view)
    numpy.testing.assert_array_equal(numpy.from_dlpack(tensor), view)
    # The memory buffer alone cannot describe it without a copy.
    with pytest.raises(tritonserver.InvalidArgumentError, match="contiguous"):
        tritonserver.MemoryBuffer.from_dlpack(base[::2])


def test_from_dlpack_rejects_objects_without_dlpack():
    with pytest.raises(tritonserver.InvalidArgumentError):
        Tensor.from_dlpack(object())
    with pytest.raises(tritonserver.InvalidArgumentError):
        tritonserver.MemoryBuffer.from_dlpack("not an array")


class _CapsuleOwnsTheMemory:
    """A producer whose capsule alone keeps the memory alive (as a GPU
    producer's capsule may, for a copy made for the export): each
    __dlpack__ exports a fresh array that the producer does not keep."""

    def __init__(self, device_type: int) -> None:
        self.device_type = device_type
        self.exported: list = []  # weak references to each export's memory

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, **kwargs):
        import weakref

        memory = numpy.full(16, 7, dtype=numpy.float32)  # held by the capsule only
        holder = tritonserver.Tensor.from_dlpack(memory)
        self.exported.append(weakref.ref(memory))
        return tritonserver._native.export_dlpack(holder, address(memory), memory.nbytes, [16], 2, 32,
                                                  self.device_type, 0, False)


def test_gpu_import_keeps_the_capsule_not_the_producer():
    # A kDLCUDA capsule (never dereferenced here: no GPU needed).
    producer = _CapsuleOwnsTheMemory(device_type=2)
    buffer = tritonserver.MemoryBuffer.from_dlpack(producer)
    tensor = Tensor.from_dlpack(producer)
    assert buffer.memory_type == MemoryType.GPU and tensor.memory_type == MemoryType.GPU
    assert buffer.owner is not producer
    gc.collect()
    assert all(ref() is not None for ref in producer.exported), "the exported memory was freed under the buffer"
    assert buffer.data_ptr == address(producer.exported[0]())
    del buffer, tensor
    gc.collect()
    assert all(ref() is None for ref in producer.exported)


def test_memory_buffer_from_dlpack_describes_memory():
    array = numpy.ones((4, 4), dtype=numpy.float64)
    buffer = tritonserver.MemoryBuffer.from_dlpack(array)
    assert buffer.data_ptr == address(array)
    assert buffer.size == array.nbytes
    assert buffer.memory_type == MemoryType.CPU and buffer.memory_type_id == 0
    assert buffer.owner is array


# -- host / device -----------------------------------------------------------
def test_identity_to_host_of_cpu_tensor_is_itself(output):
    assert output.to_host() is output
    assert output.to_device("cpu") is output
    assert output.to_device(MemoryType.CPU) is output
    assert output.to_device((MemoryType.CPU, 0)) is output


@pytest.mark.skipif(has_gpu(), reason="checks the behaviour without CUDA")
@pytest.mark.parametrize("device", ["gpu", "gpu:0", "gpu:7", (MemoryType.GPU, 3)], ids=str)
def test_identity_to_device_gpu_without_cuda_is_unsupported(output, device):
    with pytest.raises(tritonserver.UnsupportedError):
        output.to_device(device)


def test_identity_numpy_asarray_is_a_view(output):
    array = numpy.asarray(output)
    assert address(array) == output.data_ptr
    assert array.dtype == numpy.float32
    copied = numpy.array(output)  # an explicit copy is a copy
    numpy.testing.assert_array_equal(copied, array)
    assert address(copied) != output.data_ptr


# -- a consumer's refusal ---------------------------------------------------------
def test_consumer_refusal_reaches_the_caller_and_frees_the_export(model):
    # NumPy has no bfloat16: numpy.from_dlpack() refuses a BF16 capsule and
    # drops it with its own exception set. The capsule's destructor releases
    # the export without clearing that exception (it used to, and the call
    # then failed with "SystemError: ... returned NULL without setting an
    # exception").
    bits = numpy.array([0x3F80, 0x4000], dtype=numpy.uint16)  # 1.0, 2.0 in bfloat16
    output = single(model("identity_bf16").infer(inputs={"INPUT0": Tensor(
        DataType.BF16, [2], tritonserver.MemoryBuffer.from_dlpack(bits))})).outputs["OUTPUT0"]
    with pytest.raises(Exception) as info:
        numpy.from_dlpack(output)
    # NumPy's own error (1.x: RuntimeError "Unsupported dtype in DLTensor.").
    assert not isinstance(info.value, SystemError), info.value
    assert "dtype" in str(info.value).lower(), info.value
    # The refused export held the output's buffer; it is freed with the rest.
    del output, info
    assert_no_live_buffers()
