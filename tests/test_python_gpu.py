"""GPU tensors in python models run in-process and in bound functions: CUDA
inputs copied to the host by default or kept on the device
(FORCE_CPU_ONLY_INPUT_TENSORS "no"), outputs taken from CuPy / PyTorch
through DLPack and copied once into the response's buffer, host outputs
written into GPU memory when the client asks for it. Tests marked `gpu`
need a CUDA device (skipped cleanly without one); the others check, without
touching device memory, how a tensor labelled as CUDA memory is described
and refused."""

from __future__ import annotations

import numpy
import pytest

import tritonserver
from tritonserver import MemoryType, TensorSpec, _native
from tritonserver._python_models import pb_utils
from common import as_numpy, concurrent_rows, has_gpu, single

_FLOAT, _CUDA = 2, 2  # DLPack type code, device type


class LabelledCuda:
    """Host memory described through DLPack as CUDA device 0 memory: what a
    CUDA tensor looks like to the code under test, with no device touched."""

    def __init__(self, array: numpy.ndarray) -> None:
        self.array = array

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_CUDA, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        a = self.array
        return _native.export_dlpack(a, a.ctypes.data, a.nbytes, list(a.shape), _FLOAT, 32, _CUDA, 0, False)


def on_host(tensor: tritonserver.Tensor, cupy=None) -> numpy.ndarray:
    """An output's values, read from the device when it is in GPU memory."""
    if tensor.memory_type == MemoryType.GPU:
        return cupy.asnumpy(cupy.from_dlpack(tensor))
    return as_numpy(tensor)


# -- Without a device: how a CUDA tensor is described and refused ---------------------------
@pytest.mark.parametrize("bare_capsule", [False, True], ids=["object", "capsule"])
def test_a_cuda_tensor_is_described_not_read(bare_capsule):
    data = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    producer = LabelledCuda(data)
    assert _native.dlpack_capsule_device(producer.__dlpack__()) == (_CUDA, 0)
    assert _native.dlpack_capsule_device(data.__dlpack__()) == (1, 0)
    tensor = pb_utils.Tensor.from_dlpack("T", producer.__dlpack__() if bare_capsule else producer)
    assert not tensor.is_cpu()
    assert tensor.shape() == [2, 3]
    assert tensor.triton_dtype() == int(tritonserver.DataType.FP32)
    assert tensor.__dlpack_device__() == (_CUDA, 0)
    assert _native.dlpack_capsule_device(tensor.to_dlpack()) == (_CUDA, 0)
    with pytest.raises(pb_utils.TritonModelException, match="Tensor 'T' is in GPU memory .*to_dlpack"):
        tensor.as_numpy()
    host = pb_utils.Tensor.from_dlpack("H", data)
    assert host.is_cpu() and host.__dlpack_device__() == (1, 0)


def test_only_a_dlpack_capsule_has_a_capsule_device():
    with pytest.raises(TypeError, match="DLPack capsule"):
        _native.dlpack_capsule_device(object())
    consumed = numpy.ones(2).__dlpack__()
    numpy.from_dlpack(type("Holder", (), {"__dlpack__": lambda self, **k: consumed,
                                          "__dlpack_device__": lambda self: (1, 0)})())
    with pytest.raises(TypeError, match="not consumed yet"):
        _native.dlpack_capsule_device(consumed)


def test_a_gpu_output_without_cuda_is_an_error_response_naming_it(inproc):
    if has_gpu():
        pytest.skip("checks the behaviour without CUDA")
    server = inproc.server
    model = server.bind("labelled_cuda", lambda X: {"Y": LabelledCuda(X * 2)},
                        inputs=[TensorSpec("X", numpy.float32, (-1,))], outputs=[TensorSpec("Y", numpy.float32, (-1,))])
    with pytest.raises(tritonserver.UnsupportedError, match="output 'Y'.* needs CUDA"):
        single(model.infer(inputs={"X": numpy.ones(3, numpy.float32)}))
    ok = server.bind("labelled_host", lambda X: {"Y": X * 2}, inputs=[TensorSpec("X", numpy.float32, (-1,))],
                     outputs=[TensorSpec("Y", numpy.float32, (-1,))])
    numpy.testing.assert_array_equal(as_numpy(single(ok.infer(inputs={"X": numpy.ones(3, numpy.float32)}))
                                              .outputs["Y"]), [2, 2, 2])


def test_binding_gpu_inputs_with_batching_is_refused(inproc):
    server = inproc.server
    with pytest.raises(ValueError, match="cannot be joined into batches; bind with max_batch_size=0"):
        server.bind("bound_refused", lambda X: {"Y": X}, inputs=[TensorSpec("X", numpy.float32, (2,))],
                    outputs=[TensorSpec("Y", numpy.float32, (2,))], max_batch_size=4,
                    config={"parameters": {"FORCE_CPU_ONLY_INPUT_TENSORS": {"string_value": "No"}}})
    assert "bound_refused" not in {name for name, _ in server.models()}


# -- With a device ----------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_inputs_reach_a_python_model_in_host_memory(inproc, cupy):
    """Without FORCE_CPU_ONLY_INPUT_TENSORS "no" inputs are copied to the
    host, as the stub does."""
    a = cupy.arange(16, dtype=cupy.float32) / 3
    b = cupy.full(16, 2.5, dtype=cupy.float32)
    response = single(inproc("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), cupy.asnumpy(a + b))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), cupy.asnumpy(a - b))


@pytest.mark.gpu
def test_a_python_models_outputs_written_into_gpu_memory(inproc, cupy):
    a = numpy.arange(4096, dtype=numpy.float32)
    b = numpy.full(4096, 0.5, dtype=numpy.float32)
    response = single(inproc("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}, output_memory_type="gpu:0"))
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == MemoryType.GPU and out.memory_type_id == 0
    numpy.testing.assert_array_equal(on_host(out, cupy), a + b)
    numpy.testing.assert_array_equal(on_host(response.outputs["OUTPUT1"], cupy), a - b)


@pytest.mark.gpu
@pytest.mark.parametrize("memory", ["cpu", "gpu:0"])
def test_cuda_inputs_stay_on_the_device_when_the_config_says_so(inproc, cupy, torch, memory):
    data = cupy.arange(100_000, dtype=cupy.float32) / 7
    response = single(inproc("gpu_tensors").infer(inputs={"INPUT0": data}, output_memory_type=memory))
    assert on_host(response.outputs["INPUT_ON_GPU"], cupy).tolist() == [True]
    out = response.outputs["OUTPUT0"]
    assert out.memory_type == (MemoryType.GPU if memory == "gpu:0" else MemoryType.CPU)
    numpy.testing.assert_array_equal(on_host(out, cupy), cupy.asnumpy(data * 2))


@pytest.mark.gpu
def test_host_inputs_and_a_torch_cuda_output(inproc, cupy, torch):
    data = numpy.linspace(-1, 1, 5000, dtype=numpy.float32)
    for _ in range(20):  # the output is copied from the model's tensor, which it frees at once
        response = single(inproc("gpu_tensors").infer(inputs={"INPUT0": data}))
        assert as_numpy(response.outputs["INPUT_ON_GPU"]).tolist() == [False]
        numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), data * 2)


@pytest.mark.gpu
def test_a_bound_function_returns_cuda_tensors_split_by_request(inproc, torch):
    server = inproc.server
    seen: list[int] = []

    def triple(X):
        seen.append(X.shape[0])
        return {"Y": torch.from_numpy(X.copy()).to("cuda") * 3}

    model = server.bind("bound_cuda", triple, inputs=[TensorSpec("X", numpy.float32, (4,))],
                        outputs=[TensorSpec("Y", numpy.float32, (4,))], max_batch_size=8,
                        max_queue_delay_us=200_000, preferred_batch_sizes=[8])

    for i, result in enumerate(concurrent_rows(model, 16)):  # each request got its own rows back
        numpy.testing.assert_array_equal(result, numpy.full((1, 4), 3 * i, numpy.float32))
    assert sum(seen) == 16 and max(seen) > 1, f"the callable saw batch sizes {seen}"


@pytest.mark.gpu
def test_a_non_contiguous_cuda_output_is_an_error_naming_it(inproc, torch):
    model = inproc.server.bind(
        "bound_cuda_transposed", lambda X: {"Y": torch.from_numpy(X.copy()).to("cuda").t()},
        inputs=[TensorSpec("X", numpy.float32, (2, 2))], outputs=[TensorSpec("Y", numpy.float32, (2, 2))])
    with pytest.raises(tritonserver.InvalidArgumentError, match="output 'Y' is a non-contiguous GPU tensor"):
        single(model.infer(inputs={"X": numpy.eye(2, dtype=numpy.float32)}))


@pytest.mark.gpu
def test_a_bound_function_takes_cuda_inputs_when_asked(inproc, cupy, torch):
    def double(X):
        assert X.__dlpack_device__() == (_CUDA, 0), X
        return {"Y": torch.from_dlpack(X) * 2}

    model = inproc.server.bind(
        "bound_cuda_inputs", double, inputs=[TensorSpec("X", numpy.float32, (-1,))],
        outputs=[TensorSpec("Y", numpy.float32, (-1,))],
        config={"parameters": {"FORCE_CPU_ONLY_INPUT_TENSORS": {"string_value": "no"}}})
    data = cupy.arange(1000, dtype=cupy.float32)
    response = single(model.infer(inputs={"X": data}, output_memory_type="gpu"))
    numpy.testing.assert_array_equal(on_host(response.outputs["Y"], cupy), cupy.asnumpy(data * 2))
