"""A decoupled python model's `async def execute`, as the 2.51 stub runs
it: on an event loop of its own thread, execute() returning to the core at
once, so concurrent requests run concurrently (each awaiting its own I/O)
instead of one after another."""

from __future__ import annotations

import logging
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy
import pytest

import tritonserver
from common import MODELS, call_with_deadline, dedicated_server, python_model_repository, refused, wait_for

# Each request waits until all four have reached execute(): run one after
# another, the first would wait alone, so it gives up after WAIT seconds
# and answers with an error that says so.
GATHERING = """
import asyncio
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
WAIT = 20


class TritonPythonModel:
    def initialize(self, args):  # the 2.51 stub awaits no async initialize()
        self.arrived = 0
        self.all_here = asyncio.Event()  # bound to the loop that first waits on it

    async def execute(self, requests):
        self.arrived += len(requests)
        if self.arrived >= 4:
            self.all_here.set()
        for request in requests:
            sender = request.get_response_sender()
            try:
                await asyncio.wait_for(self.all_here.wait(), WAIT)
            except asyncio.TimeoutError:
                error = pb_utils.TritonError(f"ran alone: {self.arrived} of 4 requests arrived in {WAIT} s")
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                continue
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            thread = threading.current_thread().name.encode()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x + 1),
                                                    pb_utils.Tensor("OUTPUT1", np.full(x.shape, len(thread), x.dtype))]),
                        flags=FINAL)
        return None
"""

FAILING = """
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()
        await asyncio.sleep(0)
        if x[0] < 0:
            raise ValueError(f"negative input {x[0]}")
        for request in requests:
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x), pb_utils.Tensor("OUTPUT1", x)]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

# BLS from the background loop: each request awaits add_sub on its inputs.
CALLING = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, n) for n in ("INPUT0", "INPUT1")]
            answer = await pb_utils.InferenceRequest(model_name="add_sub", inputs=inputs,
                                                     requested_output_names=["OUTPUT0", "OUTPUT1"]).async_exec()
            request.get_response_sender().send(pb_utils.InferenceResponse(answer.output_tensors()),
                                               flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

# The stub's behaviour is the reference: the same model runs there too.
MODES = ["in-process", pytest.param("stub", marks=pytest.mark.python_stub)]


def _request(model: tritonserver.Model, value: float) -> list[tritonserver.InferenceResponse]:
    x = numpy.full(3, value, numpy.float32)
    return list(model.infer(inputs={"INPUT0": x, "INPUT1": x}))


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_requests_await_concurrently(backend_directory, tmp_path, mode):
    repo = python_model_repository(tmp_path, "gathering", GATHERING, decoupled=True)
    with dedicated_server(backend_directory, f"async-decoupled-{mode}", ["gathering"], python_models=mode,
                          model_repository=str(repo)) as server:
        model = server.model("gathering")
        with ThreadPoolExecutor(4) as pool:
            calls = [pool.submit(call_with_deadline, lambda v=v: _request(model, v), 90) for v in range(4)]
            results = [call.result() for call in calls]
        for value, responses in enumerate(results):
            answered = [r for r in responses if r.outputs]
            assert [r.error for r in responses] == [None] * len(responses), responses
            assert len(answered) == 1 and responses[-1].final
            numpy.testing.assert_array_equal(numpy.from_dlpack(answered[0].outputs["OUTPUT0"]),
                                             numpy.full(3, value + 1, numpy.float32))


def test_a_failing_async_execute_answers_its_requests_and_the_model_keeps_serving(backend_directory, tmp_path,
                                                                                 caplog):
    """The stub only logs the exception (its client waits on); in-process
    the error is logged as the stub words it and also answers the request."""
    repo = python_model_repository(tmp_path, "failing", FAILING, decoupled=True)
    with dedicated_server(backend_directory, "async-decoupled-failing", ["failing"], python_models="in-process",
                          model_repository=str(repo)) as server:
        model = server.model("failing")
        with caplog.at_level(logging.ERROR, logger="tritonserver.models"):
            with refused(tritonserver.InternalError,
                         match=r"Failed to process the request\(s\) for model 'failing_0_0', message: ValueError: "
                         r"negative input -2.0\n\nAt:\n  \S*model.py\(\d+\): execute\n$"):
                call_with_deadline(lambda: _request(model, -2), 60)
        assert wait_for(lambda: any("negative input -2.0" in r.getMessage() for r in caplog.records))
        (response,) = call_with_deadline(lambda: _request(model, 5), 60)
        assert response.error is None
        numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["OUTPUT0"]), numpy.full(3, 5.0))


@pytest.mark.parametrize("mode", MODES)
def test_async_bls_from_a_decoupled_model(backend_directory, tmp_path, mode):
    repo = python_model_repository(tmp_path, "calling", CALLING, decoupled=True)
    shutil.copytree(MODELS / "add_sub", repo / "add_sub")
    with dedicated_server(backend_directory, f"async-decoupled-bls-{mode}", ["add_sub", "calling"],
                          python_models=mode, model_repository=str(repo)) as server:
        model = server.model("calling")
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda v: call_with_deadline(lambda: _request(model, v), 60), range(8)))
        for value, responses in enumerate(results):
            (answered,) = [r for r in responses if r.outputs]
            numpy.testing.assert_array_equal(numpy.from_dlpack(answered.outputs["OUTPUT0"]),
                                             numpy.full(3, 2 * value, numpy.float32))
