"""Request rescheduling (`request.set_release_flags(
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)`) of in-process python models, as
the 2.51 python backend gives it: an iterative sequence model has the same
request given to execute() again, non-decoupled (None in the returned list
for it) and decoupled (a response per pass through its sender)."""

from __future__ import annotations

import numpy
import pytest

import tritonserver
from common import call_with_deadline, dedicated_server, python_model_repository, refused

ITERATIVE = "sequence_batching { iterative_sequence: true }\n"

# Non-decoupled: each request is rescheduled `INPUT1[0]` times, counting
# its passes; the response (OUTPUT0: the passes, OUTPUT1: INPUT0) comes on
# the last one.
COUNTING = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.passes = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = request.correlation_id()
            self.passes[key] = self.passes.get(key, 0) + 1
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            wanted = int(pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()[0])
            if self.passes[key] <= wanted:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
            else:
                done = np.full(x.shape, self.passes.pop(key), np.float32)
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT0", done), pb_utils.Tensor("OUTPUT1", x)]))
        return responses
"""

# Decoupled: INPUT1[0] responses, one per pass, OUTPUT0 the number left;
# rescheduled until the last, sent with the final flag.
COUNTDOWN = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.left = {}

    def execute(self, requests):
        for request in requests:
            key = request.correlation_id()
            if key not in self.left:
                self.left[key] = int(pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()[0])
            self.left[key] -= 1
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            response = pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", np.full(x.shape, self.left[key], np.float32)),
                pb_utils.Tensor("OUTPUT1", x)])
            sender = request.get_response_sender()
            if self.left[key] <= 0:
                del self.left[key]
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                sender.send(response)
        return None
"""


# The stub's behaviour is the reference: the same models run there too.
MODES = ["in-process", pytest.param("stub", marks=pytest.mark.python_stub)]


def _server(backend_directory, tmp_path, source, decoupled=False, extra=ITERATIVE, mode="in-process"):
    repo = python_model_repository(tmp_path, "m", source, decoupled=decoupled, extra_config=extra)
    return dedicated_server(backend_directory, f"rescheduling-{mode}", ["m"], python_models=mode,
                            model_repository=str(repo))


def _infer(model, sequence: int, passes: int):
    """The responses of a request of `passes` passes (INPUT0: `sequence`)."""
    inputs = {"INPUT0": numpy.full(2, float(sequence), numpy.float32),
              "INPUT1": numpy.full(2, float(passes), numpy.float32)}
    return list(model.infer(inputs=inputs))  # the core gives it a sequence of its own


@pytest.mark.parametrize("mode", MODES)
def test_a_rescheduled_request_comes_back_until_the_model_answers_it(backend_directory, tmp_path, mode):
    with _server(backend_directory, tmp_path, COUNTING, mode=mode) as server:
        model = server.model("m")
        for sequence, passes in ((1, 0), (2, 1), (3, 5)):
            (response,) = call_with_deadline(lambda: _infer(model, sequence, passes), 60)
            assert response.error is None
            numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["OUTPUT0"]),
                                             numpy.full(2, passes + 1, numpy.float32))
            numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["OUTPUT1"]),
                                             numpy.full(2, sequence, numpy.float32))


@pytest.mark.parametrize("mode", MODES)
def test_a_decoupled_model_sends_one_response_per_pass(backend_directory, tmp_path, mode):
    with _server(backend_directory, tmp_path, COUNTDOWN, decoupled=True, mode=mode) as server:
        model = server.model("m")
        responses = call_with_deadline(lambda: _infer(model, 7, 4), 60)
        left = [float(numpy.from_dlpack(r.outputs["OUTPUT0"])[0]) for r in responses if "OUTPUT0" in r.outputs]
        assert left == [3.0, 2.0, 1.0, 0.0]
        assert all(r.error is None for r in responses)
        assert responses[-1].final


@pytest.mark.parametrize("mode", MODES)
def test_a_response_for_a_rescheduled_request_is_the_stubs_error(backend_directory, tmp_path, mode):
    source = COUNTING.replace("responses.append(None)", "responses.append(pb_utils.InferenceResponse())")
    with _server(backend_directory, tmp_path, source, mode=mode) as server:
        with refused(tritonserver.TritonError, match="Expected a None object in the execute function return list "
                     "for reschduled request, found type '<class '.*InferenceResponse'>'"):
            call_with_deadline(lambda: _infer(server.model("m"), 1, 1), 60)
        # Not rescheduled: the model still serves.
        (response,) = call_with_deadline(lambda: _infer(server.model("m"), 2, 0), 60)
        assert response.error is None


def test_rescheduling_without_an_iterative_sequence_config_is_an_error_naming_the_fix(backend_directory, tmp_path):
    with _server(backend_directory, tmp_path, COUNTING, extra="") as server:
        model = server.model("m")
        a = numpy.ones(2, numpy.float32)
        with refused(tritonserver.InvalidArgumentError,
                     match=r"model 'm': the request cannot be rescheduled: .*iterative_sequence: true"):
            call_with_deadline(lambda: list(model.infer(inputs={"INPUT0": a, "INPUT1": a})), 60)
        (response,) = call_with_deadline(lambda: list(model.infer(inputs={"INPUT0": a, "INPUT1": 0 * a})), 60)
        assert response.error is None


def test_set_release_flags_refuses_other_values(backend_directory, tmp_path):
    source = COUNTING.replace("pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE", "3")
    with _server(backend_directory, tmp_path, source) as server:
        with refused(tritonserver.TritonError, match=r"set_release_flags\(3\): the flags are"):
            call_with_deadline(lambda: _infer(server.model("m"), 1, 1), 60)
