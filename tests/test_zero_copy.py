"""Zero-copy, end to end: an output is the very buffer Triton's allocator
handed out, NumPy views share it, it outlives the response, iterator and
request, and it is freed once the last view goes. Output memory placement
(CPU default, pinned, GPU requests without CUDA, invalid specs), and
zero-size tensors (at the end of this file: see the note there).
"""

from __future__ import annotations

import numpy
import pytest

import tritonserver
from tritonserver import DataType, MemoryType, Tensor
from common import address, as_numpy, assert_no_live_buffers, has_gpu, hooks, settle, single



no_cuda_only = pytest.mark.skipif(has_gpu(), reason="checks the behaviour without CUDA")


# -- outputs -------------------------------------------------------------------------
@pytest.mark.parametrize("model_name", ["identity_fp32", "add_sub"])
def test_output_zero_copy_end_to_end(model, model_name):
    data = (numpy.arange(4096, dtype=numpy.float32) - 2048) * 0.25
    m = model(model_name)
    inputs = {"INPUT0": data} if model_name == "identity_fp32" else {"INPUT0": data, "INPUT1": numpy.zeros_like(data)}
    request = m.create_request(inputs=inputs)
    iterator = m.infer(request)
    response = single(iterator)
    out = response.outputs["OUTPUT0"]
    pointer = out.data_ptr
    assert out.memory_type == MemoryType.CPU and out.memory_type_id == 0
    assert pointer in hooks().live_buffer_addresses(), "the output is not the allocator's buffer"
    assert pointer != address(data)

    from_dlpack = numpy.from_dlpack(out)
    from_asarray = numpy.asarray(out)
    assert address(from_dlpack) == pointer
    assert address(from_asarray) == pointer
    assert not from_dlpack.flags.owndata and not from_asarray.flags.owndata

    del response, iterator, request, out
    settle()
    assert pointer in hooks().live_buffer_addresses(), "the views must keep the buffer alive"
    # Make freed memory likely to be reused before looking at the values.
    churn = [single(model("identity_fp32").infer(inputs={"INPUT0": numpy.full(4096, 9.0, numpy.float32)}))
             for _ in range(4)]
    del churn
    settle()
    numpy.testing.assert_array_equal(from_dlpack, data)
    numpy.testing.assert_array_equal(from_asarray, data)
    assert address(from_dlpack) == pointer

    del from_dlpack
    settle()
    assert pointer in hooks().live_buffer_addresses(), "one view left: still alive"
    numpy.testing.assert_array_equal(from_asarray, data)
    del from_asarray
    assert_no_live_buffers()
    assert pointer not in hooks().live_buffer_addresses()


def test_identity_every_output_buffer_is_freed_with_its_response(model):
    settle()
    before = hooks().live_buffer_count()
    response = single(model("identity_multi").infer(inputs={
        "INPUT0": numpy.ones((3, 3), numpy.int8),
        "INPUT1": numpy.ones((2, 2, 2), numpy.float16),
        "INPUT2": numpy.arange(5, dtype=numpy.uint64),
    }))
    pointers = [t.data_ptr for t in response.outputs.values()]
    assert len(set(pointers)) == 3
    live = set(hooks().live_buffer_addresses())
    assert all(p in live for p in pointers)
    assert hooks().live_buffer_count() == before + 3
    del response
    assert_no_live_buffers()


def test_stream_outputs_are_zero_copy(model):
    arrays = []
    for response in model("streaming").infer(inputs={"COUNT": numpy.array([20], numpy.int32)}):
        if response.final:
            break
        out = response.outputs["OUT"]
        assert out.data_ptr in hooks().live_buffer_addresses()
        array = numpy.from_dlpack(out)
        assert address(array) == out.data_ptr
        arrays.append(array)
    settle()
    assert [a.tolist() for a in arrays] == [[i] for i in range(20)]
    del arrays, array, out, response
    assert_no_live_buffers()


def test_identity_views_of_many_responses_are_freed(model):
    kept = []
    for i in range(50):
        out = single(model("identity_fp32").infer(inputs={"INPUT0": numpy.full(128, i, numpy.float32)}))
        kept.append(numpy.from_dlpack(out.outputs["OUTPUT0"]))
    del out
    settle()
    assert hooks().live_buffer_count() >= 50
    for i, array in enumerate(kept):
        assert (array == i).all()
    del kept, array
    assert_no_live_buffers()


# -- inputs ----------------------------------------------------------------------------
def test_identity_input_passed_by_pointer(model):
    data = numpy.arange(256, dtype=numpy.float32) ** 2
    tensor = Tensor._from_object(data)
    assert tensor.data_ptr == address(data)
    assert tensor.memory_buffer.owner is data
    assert Tensor._from_object(tensor) is tensor
    response = single(model("identity_fp32").infer(inputs={"INPUT0": tensor}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), data)
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), data)


# -- output memory placement -----------------------------------------------------------
@pytest.mark.parametrize("memory", [None, "cpu", "CPU", "cpu:0", MemoryType.CPU, (MemoryType.CPU, 0),
                                    (tritonserver.DLDeviceType.kDLCPU, 0)])
def test_identity_cpu_output_memory(model, memory):
    kwargs = {} if memory is None else {"output_memory_type": memory}
    response = single(model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(4, numpy.float32)}, **kwargs))
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.CPU
    assert out.memory_type_id == 0
    assert out.__dlpack_device__() == (1, 0)
    assert as_numpy(out).tolist() == [1.0] * 4


def test_default_output_memory_is_cpu_python_backend(model):
    response = single(model("echo_all_types").infer(inputs={"IN_INT32": numpy.arange(3, dtype=numpy.int32)}))
    assert response.outputs["OUT_INT32"].memory_type == MemoryType.CPU


@no_cuda_only
def test_identity_gpu_model_falls_back_to_cpu_without_cuda(model):
    # identity_gpu asks the allocator for GPU memory; without CUDA it gets CPU.
    data = numpy.arange(10, dtype=numpy.float32)
    response = single(model("identity_gpu").infer(inputs={"INPUT0": data}))
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.CPU
    numpy.testing.assert_array_equal(as_numpy(out), data)


@no_cuda_only
@pytest.mark.parametrize(
    "memory",
    ["gpu", "gpu:0", "GPU:0", "gpu:7", "cuda", (MemoryType.GPU, 0), MemoryType.GPU,
     (tritonserver.DLDeviceType.kDLCUDA, 0)],
    ids=str,
)
@pytest.mark.parametrize("model_name", ["identity_fp32", "identity_gpu"])
def test_identity_gpu_output_without_cuda_is_unsupported(model, memory, model_name):
    with pytest.raises(tritonserver.UnsupportedError):
        model(model_name).infer(inputs={"INPUT0": numpy.ones(3, numpy.float32)}, output_memory_type=memory)
    response = single(model(model_name).infer(inputs={"INPUT0": numpy.ones(3, numpy.float32)}))
    assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [1.0] * 3
    del response
    assert_no_live_buffers()


@no_cuda_only
@pytest.mark.parametrize("memory", ["cpu_pinned", "CPU_PINNED", MemoryType.CPU_PINNED, (MemoryType.CPU_PINNED, 0),
                                    (tritonserver.DLDeviceType.kDLCUDAHost, 0)], ids=str)
def test_identity_pinned_output_without_cuda_is_cpu(model, memory):
    data = numpy.arange(7, dtype=numpy.float32)
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}, output_memory_type=memory))
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.CPU
    assert out.data_ptr in hooks().live_buffer_addresses()
    array = numpy.from_dlpack(out)
    assert address(array) == out.data_ptr
    numpy.testing.assert_array_equal(array, data)


@pytest.mark.parametrize("memory", ["tpu", "", "gpu:x", "gpu:-1", "cpu:0:0", "gpu:", 3, 1.5,
                                    (7, 0), ("gpu", 0), (MemoryType.GPU, -1), (MemoryType.GPU, "0"), [MemoryType.CPU, 0]],
                         ids=repr)
def test_identity_invalid_output_memory_type(model, memory):
    with pytest.raises(tritonserver.InvalidArgumentError):
        model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_memory_type=memory)
    response = single(model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}))
    assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]


# -- GPU (skipped without CUDA) ------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("model_name", ["identity_fp32", "identity_gpu"])
def test_identity_gpu_output_zero_copy_cupy(model, model_name):
    cupy = pytest.importorskip("cupy")
    data = numpy.arange(1000, dtype=numpy.float32) - 500
    response = single(model(model_name).infer(inputs={"INPUT0": data}, output_memory_type="gpu:0"))
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.GPU and out.memory_type_id == 0
    assert out.data_ptr in hooks().live_buffer_addresses()
    array = cupy.from_dlpack(out)
    assert array.data.ptr == out.data_ptr
    del response, out
    settle()
    numpy.testing.assert_array_equal(cupy.asnumpy(array), data)
    del array
    assert_no_live_buffers()


@pytest.mark.gpu
def test_identity_gpu_input_zero_copy_cupy(model):
    cupy = pytest.importorskip("cupy")
    data = cupy.arange(300, dtype=cupy.float32) * 2
    tensor = Tensor._from_object(data)
    assert tensor.memory_type == MemoryType.GPU
    assert tensor.data_ptr == data.data.ptr
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), cupy.asnumpy(data))


# -- zero-size tensors --------------------------------------------------------------------------
# Kept last in this file on purpose: a zero-size output whose buffer is
# never released would stay counted by live_buffer_count() for the rest of
# the session, and every later assert_no_live_buffers(timeout=2.0) would fail for a
# reason that is not theirs.
@pytest.mark.parametrize("model_name", ["identity_fp32", "identity_gpu"])
def test_identity_zero_size_round_trip(model, model_name):
    settle()
    empty = numpy.zeros(0, dtype=numpy.float32)
    response = single(model(model_name).infer(inputs={"INPUT0": empty}))
    out = response.outputs["OUTPUT0"]
    assert out.data_type == DataType.FP32
    assert list(out.shape) == [0]
    assert out.size == 0
    result = numpy.from_dlpack(out)
    assert result.shape == (0,) and result.dtype == numpy.float32
    assert numpy.asarray(out).shape == (0,)
    del result, out, response
    assert_no_live_buffers(timeout=2.0)


def test_identity_zero_size_multi_dim(model):
    inputs = {
        "INPUT0": numpy.zeros((0, 4), numpy.int8),
        "INPUT1": numpy.zeros((2, 0, 3), numpy.float16),
        "INPUT2": numpy.arange(3, dtype=numpy.uint64),
    }
    response = single(model("identity_multi").infer(inputs=inputs))
    assert list(response.outputs["OUTPUT0"].shape) == [0, 4]
    assert list(response.outputs["OUTPUT1"].shape) == [2, 0, 3]
    assert as_numpy(response.outputs["OUTPUT0"]).shape == (0, 4)
    assert as_numpy(response.outputs["OUTPUT1"]).shape == (2, 0, 3)
    assert as_numpy(response.outputs["OUTPUT2"]).tolist() == [0, 1, 2]
    del response
    assert_no_live_buffers(timeout=2.0)


@pytest.mark.parametrize("name, dtype", [("INT32", numpy.int32), ("FP16", numpy.float16), ("BOOL", numpy.bool_),
                                         ("UINT64", numpy.uint64)])
def test_zero_size_numeric_echo(model, name, dtype):
    response = single(model("echo_all_types").infer(inputs={f"IN_{name}": numpy.zeros(0, dtype)}))
    out = response.outputs[f"OUT_{name}"]
    assert out.data_type == DataType[name]
    assert list(out.shape) == [0]
    assert as_numpy(out).dtype == numpy.dtype(dtype) and as_numpy(out).shape == (0,)
    del out, response
    assert_no_live_buffers(timeout=2.0)


@pytest.mark.parametrize("model_name, input_name, output_name",
                         [("echo_all_types", "IN_STRING", "OUT_STRING"), ("identity_bytes", "INPUT0", "OUTPUT0")])
def test_zero_size_bytes(model, model_name, input_name, output_name):
    response = single(model(model_name).infer(inputs={input_name: numpy.array([], dtype=numpy.object_)}))
    out = response.outputs[output_name]
    assert out.data_type == DataType.BYTES
    assert list(out.shape) == [0]
    assert out.to_bytes_array().shape == (0,)
    assert out.to_string_array().shape == (0,)
    del out, response
    assert_no_live_buffers(timeout=2.0)
