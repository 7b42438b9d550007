"""GPU memory, end to end (every test needs a CUDA device and is skipped
cleanly without one). Only identity (C++ backend) models are used, so these
run where the python backend is unavailable.

Covers: GPU outputs (asked by the request, and by the identity_gpu
backend), zero-copy export to CuPy and PyTorch, GPU inputs from CuPy and
PyTorch passed by pointer, pinned host outputs, copies with to_host() /
to_device(), and that every GPU buffer is freed once the last view goes.
"""

from __future__ import annotations

import asyncio
import threading
import time

import numpy
import pytest

import tritonserver
from tritonserver import DataType, MemoryType, Tensor
from tritonserver import _native
from common import address, as_numpy, assert_no_live_buffers, hooks, settle, single

pytestmark = pytest.mark.gpu

GPU_SPECS = ["gpu", "gpu:0", (MemoryType.GPU, 0), (tritonserver.DLDeviceType.kDLCUDA, 0)]


def infer_one(model, model_name, data, **kwargs) -> tritonserver.InferenceResponse:
    response = single(model(model_name).infer(inputs={"INPUT0": data}, **kwargs))
    assert response.error is None, response.error
    return response


# -- GPU outputs ---------------------------------------------------------------------------
@pytest.mark.parametrize("memory", GPU_SPECS, ids=str)
@pytest.mark.parametrize("model_name", ["identity_fp32", "identity_gpu"])
def test_gpu_output_shared_with_cupy(model, cupy, model_name, memory):
    data = numpy.arange(4096, dtype=numpy.float32) * 0.5 - 7
    response = infer_one(model, model_name, data, output_memory_type=memory)
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.GPU
    assert out.memory_type_id == 0
    assert out.__dlpack_device__() == (2, 0)
    assert out.size == data.nbytes
    assert out.data_ptr in hooks().live_buffer_addresses()
    array = cupy.from_dlpack(out)
    assert array.data.ptr == out.data_ptr
    assert array.dtype == cupy.float32 and array.shape == data.shape
    assert array.device.id == 0
    numpy.testing.assert_array_equal(cupy.asnumpy(array), data)
    # The CuPy array outlives the response and keeps the buffer alive.
    pointer = out.data_ptr
    del response, out
    settle()
    assert pointer in hooks().live_buffer_addresses()
    numpy.testing.assert_array_equal(cupy.asnumpy(array * 2), data * 2)
    del array
    assert_no_live_buffers()


@pytest.mark.parametrize("model_name", ["identity_fp32", "identity_gpu"])
def test_gpu_output_shared_with_torch(model, torch, model_name):
    data = numpy.linspace(-1, 1, 999, dtype=numpy.float32)
    response = infer_one(model, model_name, data, output_memory_type="gpu:0")
    out = response.outputs["OUTPUT0"]
    tensor = torch.from_dlpack(out)
    assert tensor.is_cuda and tensor.device.index == 0
    assert tensor.dtype == torch.float32
    assert tensor.data_ptr() == out.data_ptr
    numpy.testing.assert_array_equal(tensor.cpu().numpy(), data)
    del response, out
    settle()
    numpy.testing.assert_array_equal((tensor + 1).cpu().numpy(), data + 1)
    del tensor
    assert_no_live_buffers()


def test_gpu_output_is_not_a_numpy_array(model, cupy):
    response = infer_one(model, "identity_fp32", numpy.ones(4, numpy.float32), output_memory_type="gpu")
    out = response.outputs["OUTPUT0"]
    with pytest.raises(TypeError):
        numpy.asarray(out)
    with pytest.raises(Exception):
        numpy.from_dlpack(out)
    # ... but its host copy is.
    numpy.testing.assert_array_equal(numpy.asarray(out.to_host()), numpy.ones(4, numpy.float32))


def test_identity_gpu_model_without_request_preference_gets_cpu(model):
    # The allocator follows the request (default CPU), whatever the backend asks.
    data = numpy.arange(12, dtype=numpy.float32)
    out = infer_one(model, "identity_gpu", data).outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.CPU
    numpy.testing.assert_array_equal(as_numpy(out), data)


# A kernel that keeps the legacy default stream busy for `cycles` clock
# ticks, then (when `n` > 0) writes `value` into `out[:n]`: it stands for a
# copy still in flight there (the identity backend's cudaMemcpy, to_device()).
SPIN_SOURCE = r"""
extern "C" __global__ void spin_then_fill(long long cycles, float* out, float value, long long n) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    for (long long i = threadIdx.x; i < n; i += blockDim.x) out[i] = value;
}
"""
SPIN_CYCLES = 1_000_000_000  # about half a second on an H200 (1.98 GHz)


def busy_default_stream(cupy, out=None, value: float = 0.0) -> None:
    """Queue the spin (then a write into `out`, a CuPy float32 array) on the
    legacy default stream; returns at once."""
    kernel = cupy.RawKernel(SPIN_SOURCE, "spin_then_fill")
    target = out if out is not None else cupy.empty(1, cupy.float32)
    n = out.size if out is not None else 0
    with cupy.cuda.Stream.null:
        kernel((1,), (256,), (cupy.int64(SPIN_CYCLES), target, cupy.float32(value), cupy.int64(n)))


def capsule_data_and_device(capsule) -> tuple[int, tuple[int, int]]:
    import ctypes

    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    words = (ctypes.c_int64 * 2).from_address(get_pointer(capsule, b"dltensor"))
    device = (ctypes.c_int32 * 2).from_address(get_pointer(capsule, b"dltensor") + 8)
    return words[0], (device[0], device[1])


def test_gpu_output_dlpack_streams(model, cupy, torch):
    out = infer_one(model, "identity_fp32", numpy.arange(8, dtype=numpy.float32),
                    output_memory_type="gpu").outputs["OUTPUT0"]
    cupy.cuda.runtime.deviceSynchronize()
    # Every value the array API standard allows for CUDA gives a capsule of
    # the very buffer.
    cupy_stream = cupy.cuda.Stream(non_blocking=True)
    torch_stream = torch.cuda.Stream()
    for stream_value in (None, 1, 2, -1, cupy_stream.ptr, torch_stream.cuda_stream):
        assert capsule_data_and_device(out.__dlpack__(stream=stream_value)) == (out.data_ptr, (2, 0))
    # A stream handle (> 2) is made to wait for the legacy default stream:
    # with that stream busy, the consumer's stream has work pending right
    # after __dlpack__ returns (it had none before); -1 (no synchronization)
    # and 1/2 (ordered by CUDA itself) queue nothing on it.
    for query, handle, synchronize in ((lambda: cupy_stream.done, cupy_stream.ptr, cupy_stream.synchronize),
                                       (torch_stream.query, torch_stream.cuda_stream, torch_stream.synchronize)):
        busy_default_stream(cupy)
        assert query(), "the consumer's stream had work before __dlpack__"
        out.__dlpack__(stream=-1)
        assert query(), "stream=-1 must not make any stream wait"
        out.__dlpack__(stream=handle)
        assert not query(), "__dlpack__(stream=handle) did not make the stream wait for the default stream"
        synchronize()
        assert query()
    with cupy_stream:
        array = cupy.from_dlpack(out)  # CuPy passes its current stream
        numpy.testing.assert_array_equal(cupy.asnumpy(array, stream=cupy_stream), numpy.arange(8, dtype=numpy.float32))
    for bad in ("default", 0, -2, True, 1.5):
        with pytest.raises(BufferError):
            out.__dlpack__(stream=bad)


@pytest.mark.parametrize("source", ["to_device", "gpu_output"])
def test_consumer_stream_sees_a_completed_copy(model, cupy, source):
    # Copies into our GPU buffers (to_device()'s cudaMemcpy, the identity
    # backend's) run on the legacy default stream and may still be in flight
    # when the buffer reaches Python. Here the "copy" is a kernel that spins
    # about half a second on that stream, then writes 42 into the buffer; a
    # consumer on a non-blocking stream must see the 42s: __dlpack__ makes
    # its stream wait for the default stream. Without that wait the sum runs
    # at once, over the old values.
    n = 1 << 20
    data = numpy.arange(n, dtype=numpy.float32)
    if source == "to_device":
        moved = Tensor.from_dlpack(data).to_device("gpu:0")
    else:
        moved = infer_one(model, "identity_fp32", data, output_memory_type="gpu:0").outputs["OUTPUT0"]
    cupy.cuda.runtime.deviceSynchronize()
    with cupy.cuda.Stream.null:
        writer_view = cupy.from_dlpack(moved)  # stream 1: no wait queued
    busy_default_stream(cupy, writer_view, 42.0)
    with cupy.cuda.Stream(non_blocking=True) as stream:
        array = cupy.from_dlpack(moved)
        total = array.sum(dtype=cupy.float64)
        stream.synchronize()
    assert float(total) == 42.0 * n, "the consumer's stream read the buffer before the copy on the default stream"
    cupy.cuda.runtime.deviceSynchronize()
    del moved, array, total, writer_view
    assert_no_live_buffers()


def test_gpu_buffer_freed_without_the_gil(model, torch):
    # cudaFree waits for the device: with a kernel keeping it busy, another
    # Python thread must run while the last reference to a GPU output goes.
    out = infer_one(model, "identity_fp32", numpy.ones(1 << 16, numpy.float32),
                    output_memory_type="gpu").outputs["OUTPUT0"]
    pointer = out.data_ptr
    settle()  # `out` holds the only reference left
    ticks = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            ticks[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    try:
        torch.cuda._sleep(int(3e9))  # about a second or two of GPU time
        before = ticks[0]
        start = time.monotonic()
        del out  # the last reference: cudaFree
        elapsed = time.monotonic() - start
        during = ticks[0] - before
        assert pointer not in hooks().live_buffer_addresses()  # freed by the `del` itself
    finally:
        stop.set()
        thread.join()
    torch.cuda.synchronize()
    assert_no_live_buffers()
    # Only meaningful when the free did wait for the kernel.
    assert elapsed < 0.2 or during > 0, f"the free took {elapsed:.2f} s with the GIL held"


def test_gpu_output_bytes(model, cupy):
    items = [b"", b"gpu \xff bytes", "ü".encode()]
    out = single(model("identity_bytes").infer(inputs={"INPUT0": items}, output_memory_type="gpu")).outputs["OUTPUT0"]
    assert out.data_type == DataType.BYTES
    assert out.memory_type == MemoryType.GPU
    assert out.to_bytes_array().tolist() == items  # copied to the host to decode


def test_gpu_output_multi_and_bf16(model, cupy, torch):
    inputs = {"INPUT0": numpy.arange(6, dtype=numpy.int8).reshape(2, 3),
              "INPUT1": numpy.ones((2, 1, 2), numpy.float16),
              "INPUT2": numpy.array([2**64 - 1], numpy.uint64)}
    response = single(model("identity_multi").infer(inputs=inputs, output_memory_type="gpu:0"))
    for k in range(3):
        out = response.outputs[f"OUTPUT{k}"]
        assert out.memory_type == MemoryType.GPU
        array = cupy.from_dlpack(out)
        assert array.data.ptr == out.data_ptr
        numpy.testing.assert_array_equal(cupy.asnumpy(array), inputs[f"INPUT{k}"])
    bits = numpy.array([0x3F80, 0xC020, 0x0000], dtype=numpy.uint16)  # 1.0, -2.5, 0.0 in bfloat16
    bf16 = Tensor(DataType.BF16, [3], tritonserver.MemoryBuffer.from_dlpack(bits))
    out = single(model("identity_bf16").infer(inputs={"INPUT0": bf16}, output_memory_type="gpu")).outputs["OUTPUT0"]
    as_torch = torch.from_dlpack(out)
    assert as_torch.dtype == torch.bfloat16 and as_torch.is_cuda
    assert as_torch.data_ptr() == out.data_ptr
    assert as_torch.float().cpu().tolist() == [1.0, -2.5, 0.0]


def test_cpu_bf16_output_to_torch(model, torch):
    bits = numpy.array([0x4040, 0xBF80], dtype=numpy.uint16)  # 3.0, -1.0
    bf16 = Tensor(DataType.BF16, [2], tritonserver.MemoryBuffer.from_dlpack(bits))
    out = single(model("identity_bf16").infer(inputs={"INPUT0": bf16})).outputs["OUTPUT0"]
    as_torch = torch.from_dlpack(out)
    assert as_torch.dtype == torch.bfloat16 and not as_torch.is_cuda
    assert as_torch.data_ptr() == out.data_ptr
    assert as_torch.float().tolist() == [3.0, -1.0]


def test_gpu_output_async(model, cupy):
    async def main():
        m = model("identity_fp32")

        async def one(i):
            responses = [r async for r in m.async_infer(inputs={"INPUT0": numpy.full(32, i, numpy.float32)},
                                                       output_memory_type="gpu")]
            out = responses[0].outputs["OUTPUT0"]
            assert out.memory_type == MemoryType.GPU
            return cupy.asnumpy(cupy.from_dlpack(out))

        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(16))), 60)

    for i, array in enumerate(asyncio.run(main())):
        numpy.testing.assert_array_equal(array, numpy.full(32, i, numpy.float32))
    assert_no_live_buffers()


def test_gpu_output_bad_device_id(model):
    count = _native.cuda_device_count()
    for device in (count, count + 7):
        with pytest.raises(tritonserver.InvalidArgumentError, match="out of range"):
            model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)},
                                         output_memory_type=f"gpu:{device}")
        # A copy to a device that is not there: refused, not made on another device.
        with pytest.raises(tritonserver.InvalidArgumentError, match="out of range"):
            Tensor.from_dlpack(numpy.ones(3, numpy.float32)).to_device(f"gpu:{device}")
    assert_no_live_buffers()
    out = infer_one(model, "identity_fp32", numpy.ones(2, numpy.float32)).outputs["OUTPUT0"]
    assert as_numpy(out).tolist() == [1.0, 1.0]


# -- JAX on the GPU (the user guide's claim) ---------------------------------------------------
@pytest.fixture
def jax():
    # JAX takes 75% of the GPU's memory at its first use unless told not to.
    import os

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    try:
        devices = jax.devices("gpu")
    except RuntimeError as e:  # a CPU-only jaxlib
        pytest.skip(f"JAX without a GPU backend ({e})")
    if not devices:
        pytest.skip("JAX sees no GPU")
    return jax


def test_gpu_output_shared_with_jax(model, jax):
    data = numpy.arange(4096, dtype=numpy.float32) * 0.25
    response = infer_one(model, "identity_fp32", data, output_memory_type="gpu:0")
    out = response.outputs["OUTPUT0"]
    array = jax.dlpack.from_dlpack(out)
    assert array.unsafe_buffer_pointer() == out.data_ptr, "JAX copied the GPU output"
    assert list(array.devices())[0].platform == "gpu"
    del response, out
    settle()
    numpy.testing.assert_array_equal(numpy.asarray(array * 2), data * 2)  # still valid on its own
    del array
    assert_no_live_buffers()


def test_jax_gpu_input_zero_copy(model, jax):
    import jax.numpy as jnp

    data = jnp.arange(1000, dtype=jnp.float32) - 500
    data.block_until_ready()
    tensor = Tensor.from_dlpack(data)
    assert tensor.memory_type == MemoryType.GPU and tensor.memory_type_id == 0
    assert tensor.data_ptr == data.unsafe_buffer_pointer()
    out = infer_one(model, "identity_fp32", data).outputs["OUTPUT0"]
    numpy.testing.assert_array_equal(as_numpy(out), numpy.asarray(data))
    gpu_out = infer_one(model, "identity_fp32", data, output_memory_type="gpu:0").outputs["OUTPUT0"]
    numpy.testing.assert_array_equal(numpy.asarray(jax.dlpack.from_dlpack(gpu_out)), numpy.asarray(data))


# -- GPU inputs ------------------------------------------------------------------------------
def test_cupy_input_zero_copy(model, cupy):
    data = cupy.arange(1000, dtype=cupy.float32) / 3
    tensor = Tensor._from_object(data)
    assert tensor.memory_type == MemoryType.GPU and tensor.memory_type_id == 0
    assert tensor.data_ptr == data.data.ptr
    assert tensor.size == data.nbytes
    expected = cupy.asnumpy(data)
    cpu_out = infer_one(model, "identity_fp32", data).outputs["OUTPUT0"]
    assert cpu_out.memory_type == MemoryType.CPU
    numpy.testing.assert_array_equal(as_numpy(cpu_out), expected)
    gpu_out = infer_one(model, "identity_gpu", data, output_memory_type="gpu").outputs["OUTPUT0"]
    assert gpu_out.memory_type == MemoryType.GPU
    assert gpu_out.data_ptr != data.data.ptr
    numpy.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(gpu_out)), expected)


def test_torch_cuda_input_zero_copy(model, torch):
    data = torch.arange(500, dtype=torch.float32, device="cuda:0") - 250
    tensor = Tensor._from_object(data)
    assert tensor.memory_type == MemoryType.GPU
    assert tensor.data_ptr == data.data_ptr()
    out = infer_one(model, "identity_fp32", data).outputs["OUTPUT0"]
    numpy.testing.assert_array_equal(as_numpy(out), data.cpu().numpy())
    out = infer_one(model, "identity_fp32", data, output_memory_type="gpu:0").outputs["OUTPUT0"]
    assert torch.equal(torch.from_dlpack(out), data)


def test_gpu_input_temporary_stays_alive(model, cupy):
    # A CuPy temporary passed as an input must live until Triton is done
    # with it. The backend's copy (cudaMemcpy, legacy default stream) is held
    # back by a kernel spinning there, while the temporaries go and
    # "garbage" arrays filled with -1 are made on a non-blocking stream,
    # which does not wait for the default stream: were a temporary freed, its
    # block (CuPy's pool reuses it at once) would hold -1 before the backend
    # reads it.
    with cupy.cuda.Stream(non_blocking=True):
        warm = [cupy.empty(4096, cupy.float32) for _ in range(64)]  # the pool holds blocks: no cudaMalloc below
        del warm
        cupy.cuda.get_current_stream().synchronize()
        busy_default_stream(cupy)
        iterators = []
        for i in range(8):
            iterators.append((i, model("identity_fp32").infer(inputs={"INPUT0": cupy.full(4096, i, cupy.float32)})))
        garbage = [cupy.full(4096, -1, cupy.float32) for _ in range(32)]
        for i, iterator in iterators:
            numpy.testing.assert_array_equal(as_numpy(single(iterator).outputs["OUTPUT0"]),
                                             numpy.full(4096, i, numpy.float32))
        del garbage


def test_non_contiguous_gpu_input_is_refused(model, cupy):
    data = cupy.arange(20, dtype=cupy.float32)[::2]
    with pytest.raises(tritonserver.InvalidArgumentError):
        model("identity_fp32").infer(inputs={"INPUT0": data})
    out = infer_one(model, "identity_fp32", cupy.ascontiguousarray(data)).outputs["OUTPUT0"]
    numpy.testing.assert_array_equal(as_numpy(out), cupy.asnumpy(data))


# -- pinned ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("memory", ["cpu_pinned", (MemoryType.CPU_PINNED, 0)], ids=str)
def test_pinned_output(model, memory):
    data = numpy.arange(1024, dtype=numpy.float32)
    response = infer_one(model, "identity_fp32", data, output_memory_type=memory)
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.CPU_PINNED
    assert out.__dlpack_device__() == (1, 0)
    assert out.data_ptr in hooks().live_buffer_addresses()
    array = numpy.from_dlpack(out)
    assert address(array) == out.data_ptr
    numpy.testing.assert_array_equal(array, data)
    assert out.to_host() is out
    del response, out
    settle()
    numpy.testing.assert_array_equal(array, data)
    del array
    assert_no_live_buffers()


# -- copies -------------------------------------------------------------------------------------------
def test_to_host_and_to_device_copy(model, cupy):
    data = numpy.arange(64, dtype=numpy.float32) * 1.25
    gpu_out = infer_one(model, "identity_fp32", data, output_memory_type="gpu").outputs["OUTPUT0"]
    host = gpu_out.to_host()
    assert host is not gpu_out
    assert host.memory_type == MemoryType.CPU
    assert host.data_ptr != gpu_out.data_ptr
    assert host.data_type == DataType.FP32 and list(host.shape) == [64]
    numpy.testing.assert_array_equal(numpy.from_dlpack(host), data)
    assert gpu_out.to_device("gpu:0") is gpu_out

    cpu_out = infer_one(model, "identity_fp32", data).outputs["OUTPUT0"]
    on_gpu = cpu_out.to_device("gpu:0")
    assert on_gpu.memory_type == MemoryType.GPU and on_gpu.memory_type_id == 0
    assert on_gpu.data_ptr != cpu_out.data_ptr
    array = cupy.from_dlpack(on_gpu)
    assert array.data.ptr == on_gpu.data_ptr
    numpy.testing.assert_array_equal(cupy.asnumpy(array), data)
    # numpy -> Tensor -> GPU, as the official test does.
    moved = Tensor.from_dlpack(numpy.arange(5, dtype=numpy.int32)).to_device((MemoryType.GPU, 0))
    numpy.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(moved)), numpy.arange(5, dtype=numpy.int32))
    del gpu_out, host, cpu_out, on_gpu, array, moved
    assert_no_live_buffers()


def test_memory_buffer_from_cupy_and_torch(cupy, torch):
    c = cupy.ones(10, dtype=cupy.float64)
    buffer = tritonserver.MemoryBuffer.from_dlpack(c)
    assert buffer.data_ptr == c.data.ptr and buffer.size == c.nbytes
    assert buffer.memory_type == MemoryType.GPU and buffer.memory_type_id == 0
    t = torch.ones(3, 4, dtype=torch.int16, device="cuda")
    tensor = Tensor.from_dlpack(t)
    assert tensor.data_ptr == t.data_ptr()
    assert tensor.size == t.numel() * t.element_size()
    assert tensor.__dlpack_device__() == tuple(t.__dlpack_device__())
    assert tensor.data_type == DataType.INT16 and list(tensor.shape) == [3, 4]


def test_gpu_buffers_freed_after_many_requests(model, cupy):
    kept = []
    for i in range(40):
        out = infer_one(model, "identity_gpu", numpy.full(256, i, numpy.float32),
                        output_memory_type="gpu").outputs["OUTPUT0"]
        kept.append(cupy.from_dlpack(out))
    del out
    settle()
    assert hooks().live_buffer_count() >= 40
    for i, array in enumerate(kept):
        assert bool((array == i).all())
    del kept, array
    assert_no_live_buffers()


# -- the CUDA runtime -------------------------------------------------------------------------
def test_failed_gpu_allocation_leaves_no_cuda_error():
    # A failed cudaMalloc leaves its error as the runtime's last error; our
    # runtime is usually the core's own copy, whose next cudaGetLastError
    # would then report it as a failure of the core's own.
    import ctypes

    path = _native.cuda_status().split(": ")[0]
    runtime = ctypes.CDLL(path)  # the very library our allocator opened
    runtime.cudaGetLastError()
    host = numpy.ones(4, numpy.uint8)
    with pytest.raises(tritonserver.TritonError, match="failed to allocate"):
        _native.copy(address(host), 1 << 52, int(MemoryType.CPU), int(MemoryType.GPU), 0)  # 4 PiB
    assert runtime.cudaGetLastError() == 0, "the failed cudaMalloc left its error behind"
    # ... and the device still serves a request.
    moved = Tensor.from_dlpack(numpy.arange(4, dtype=numpy.float32)).to_device("gpu:0")
    numpy.testing.assert_array_equal(numpy.from_dlpack(moved.to_host()), numpy.arange(4, dtype=numpy.float32))
