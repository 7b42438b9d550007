"""What an in-process python model (and a bound function) gets as an input:
a private, writable array, as the stub gives it, so that no consumer of the
model's array writes into the client's memory; ZERO_COPY_INPUTS "yes" in the
model's config makes it a read-only view of the request's memory instead
(no copy), the documented choice for large inputs."""

from __future__ import annotations

import contextlib

import numpy
import pytest

import tritonserver
from tritonserver import TensorSpec
from common import BY_POINTER_FP32, address, as_numpy, dedicated_server, python_model_repository, single

ZERO_COPY = 'parameters { key: "ZERO_COPY_INPUTS" value: { string_value: "yes" } }\n'

# OUTPUT0: INPUT0 after the model divided it in place (x /= 2, as models
# normalise images); OUTPUT1: where the model's array is and whether it is
# writable.
SOURCE = (
    "import numpy as np\n"
    "import triton_python_backend_utils as pb_utils\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        responses = []\n"
    "        for r in requests:\n"
    "            x = pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()\n"
    "            where = np.array([x.ctypes.data, x.flags.writeable], np.float64)\n"
    "            if x.flags.writeable:\n"
    "                x /= 2\n"
    "                np.frombuffer(memoryview(x), np.float32)[0] = 100  # a writable alias of it too\n"
    "            responses.append(pb_utils.InferenceResponse([\n"
    "                pb_utils.Tensor('OUTPUT0', x), pb_utils.Tensor('OUTPUT1', where.astype(np.float32))]))\n"
    "        return responses\n")


@pytest.fixture
def model_with(backend_directory, tmp_path):
    """model_with(extra_config): the model `inputs` running SOURCE, loaded
    in-process in a server of its own."""
    with contextlib.ExitStack() as servers:
        def start(extra_config: str = "") -> tritonserver.Model:
            repo = python_model_repository(tmp_path, "inputs", SOURCE, extra_config=extra_config)
            server = servers.enter_context(dedicated_server(
                backend_directory, "inputs", ["inputs"], python_models="in-process", model_repository=str(repo)))
            return server.model("inputs")

        yield start


def test_a_model_gets_a_private_writable_input_and_the_clients_array_is_untouched(model_with):
    model = model_with()
    a = numpy.full(4, 8, numpy.float32)
    frozen = numpy.frombuffer(bytes(numpy.full(4, 8, numpy.float32).data), numpy.float32)  # immutable bytes
    for data in (a, frozen):
        response = single(model.infer(inputs={"INPUT0": data, "INPUT1": data}))
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [100, 4, 4, 4]
        where = as_numpy(response.outputs["OUTPUT1"])
        assert where[1] == 1  # writable
        assert data.tolist() == [8, 8, 8, 8]  # the client's memory is as it sent it


def test_zero_copy_inputs_are_read_only_views_of_the_clients_memory(model_with):
    model = model_with(ZERO_COPY)
    a = numpy.arange(BY_POINTER_FP32, dtype=numpy.float32)  # smaller inputs reach the model as the request's copy
    response = single(model.infer(inputs={"INPUT0": a, "INPUT1": a}))
    where = as_numpy(response.outputs["OUTPUT1"]).astype(numpy.float64)
    assert where[1] == 0  # read-only
    assert as_numpy(response.outputs["OUTPUT0"]).tolist() == a.tolist()
    # float32 cannot hold an address exactly: compare to its precision
    assert abs(where[0] - address(a)) <= address(a) * 2 ** -23


@pytest.mark.parametrize("batched", [False, True])
def test_a_bound_function_may_write_its_inputs_alone_or_batched(backend_directory, tmp_path, batched):
    """One rule whatever the load: a lone request's input is writable, as a
    batch joined from several is (it was read-only alone)."""
    def double(X):
        X *= 2
        return {"Y": X}

    with dedicated_server(backend_directory, "bind-inputs", [], model_repository=str(tmp_path)) as server:
        spec = [TensorSpec("X", numpy.float32, (4,))]
        model = server.bind("double", double, inputs=spec, outputs=[TensorSpec("Y", numpy.float32, (4,))],
                            max_batch_size=8 if batched else 0)
        a = numpy.arange(4, dtype=numpy.float32)[None, :] if batched else numpy.arange(4, dtype=numpy.float32)
        response = single(model.infer(inputs={"X": a}))
        assert as_numpy(response.outputs["Y"]).ravel().tolist() == [0, 2, 4, 6]
        assert a.ravel().tolist() == [0, 1, 2, 3]
