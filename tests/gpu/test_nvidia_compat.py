"""GPU usage as written against NVIDIA's official in-process API (the
`tritonserver` package of the Triton core): CuPy and PyTorch tensors as
inputs, outputs asked in GPU memory by the request and handed to CuPy and
PyTorch through `from_dlpack`, and Tensor/MemoryBuffer conversions. Identity
(C++ backend) models only; every test needs a CUDA device and skips without.
The GPU check (tests/gpu/run_gpu_checks.sh) runs this file on its own.
"""

from __future__ import annotations

import numpy
import pytest

import tritonserver
from tritonserver import MemoryBuffer, MemoryType, Tensor
from common import assert_no_live_buffers, single

pytestmark = pytest.mark.gpu


def test_request_object_with_cupy_input_and_gpu_output(model, cupy):
    # The official pattern: a request made by the model, inputs set by name,
    # output memory chosen on the request.
    request = model("identity_fp32").create_request()
    data = cupy.linspace(0, 1, 257, dtype=cupy.float32)
    request.inputs["INPUT0"] = data
    request.output_memory_type = "gpu"
    response = single(model("identity_fp32").infer(request))
    output = response.outputs["OUTPUT0"]
    assert output.memory_type == MemoryType.GPU and output.memory_type_id == 0
    array = cupy.from_dlpack(output)
    assert array.data.ptr == output.data_ptr
    assert bool((array == data).all())
    del response, output, array
    assert_no_live_buffers()


def test_torch_input_and_outputs_to_torch_and_cupy(model, torch, cupy):
    data = torch.arange(64, dtype=torch.float32, device="cuda") * 0.25
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}, output_memory_type="gpu:0"))
    output = response.outputs["OUTPUT0"]
    as_torch = torch.utils.dlpack.from_dlpack(output)
    assert as_torch.device == data.device and torch.equal(as_torch, data)
    as_cupy = cupy.from_dlpack(output)
    assert as_cupy.data.ptr == as_torch.data_ptr() == output.data_ptr
    del response, output, as_torch, as_cupy
    assert_no_live_buffers()


def test_tensor_and_memory_buffer_from_gpu_arrays(cupy, torch):
    c = cupy.ones((2, 3), dtype=cupy.float16)
    t = torch.zeros(5, dtype=torch.int64, device="cuda")
    for array, pointer in ((c, c.data.ptr), (t, t.data_ptr())):
        tensor = Tensor.from_dlpack(array)
        assert tensor.memory_type == MemoryType.GPU and tensor.data_ptr == pointer
        assert tensor.__dlpack_device__() == (tritonserver.DLDeviceType.kDLCUDA, 0)
        buffer = MemoryBuffer.from_dlpack(array)
        assert buffer.memory_type == MemoryType.GPU and buffer.data_ptr == pointer


def test_to_host_and_to_device_round_trip(cupy):
    data = numpy.arange(12, dtype=numpy.int32).reshape(3, 4)
    on_gpu = Tensor.from_dlpack(data).to_device((MemoryType.GPU, 0))
    assert on_gpu.memory_type == MemoryType.GPU
    numpy.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(on_gpu)), data)
    back = on_gpu.to_host()
    assert back.memory_type == MemoryType.CPU
    numpy.testing.assert_array_equal(numpy.from_dlpack(back), data)
    del on_gpu, back
    assert_no_live_buffers()


def test_async_infer_gpu_outputs_to_torch(model, torch):
    import asyncio

    async def main():
        data = torch.full((16,), 3.5, device="cuda")
        return [r async for r in model("identity_fp32").async_infer(inputs={"INPUT0": data},
                                                                      output_memory_type="gpu")]

    responses = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(responses) == 1
    tensor = torch.from_dlpack(responses[0].outputs["OUTPUT0"])
    assert tensor.is_cuda and tensor.tolist() == [3.5] * 16


def test_pinned_output_reads_as_host_memory(model):
    data = numpy.arange(100, dtype=numpy.float32)
    output = single(model("identity_fp32").infer(inputs={"INPUT0": data},
                                                 output_memory_type="cpu_pinned")).outputs["OUTPUT0"]
    assert output.memory_type == MemoryType.CPU_PINNED
    numpy.testing.assert_array_equal(numpy.asarray(output), data)
