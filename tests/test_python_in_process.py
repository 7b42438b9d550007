"""Python-backend models run in-process (Options.python_models="in-process"):
the model API, zero-copy inputs, errors, decoupled responses, refusals and
the model's lifecycle. Runs under numpy<2 and numpy 2 alike (no stub)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading

import numpy
import pytest

import tritonserver
from common import (BY_POINTER_FP32, MODELS, ROOT, address, as_numpy, call_with_deadline, dedicated_server, hooks,
                    fp32, make_options, python_model_repository, refused, run_script, single)


def test_add_sub(inproc):
    a = numpy.arange(16, dtype=numpy.float32)
    b = numpy.full(16, 2.5, dtype=numpy.float32)
    response = single(inproc("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), a + b)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), a - b)


def test_statistics_count_a_request_once_its_response_arrived(inproc):
    """The model's statistics are reported before its responses are sent
    (cpp/python_backend/response_outbox.h): a client that got its response reads it counted.
    Sent first, the statistics lagged the response in up to 43 of 300
    requests here."""
    model = inproc("add_sub")
    data = numpy.arange(16, dtype=numpy.float32)

    def successes() -> int:
        return int(model.statistics()["model_stats"][0]["inference_stats"]["success"]["count"])

    before = successes()
    for i in range(1, 301):
        single(model.infer(inputs={"INPUT0": data, "INPUT1": data}))
        assert successes() == before + i, f"request {i}: answered but not yet counted"


def test_every_datatype_round_trips(inproc):
    inputs = {
        "IN_BOOL": numpy.array([True, False, True]),
        "IN_UINT8": numpy.array([0, 255], numpy.uint8),
        "IN_UINT16": numpy.array([0, 65535], numpy.uint16),
        "IN_UINT32": numpy.array([0, 2**32 - 1], numpy.uint32),
        "IN_UINT64": numpy.array([0, 2**64 - 1], numpy.uint64),
        "IN_INT8": numpy.array([-128, 127], numpy.int8),
        "IN_INT16": numpy.array([-32768, 32767], numpy.int16),
        "IN_INT32": numpy.array([-2**31, 2**31 - 1], numpy.int32),
        "IN_INT64": numpy.array([-2**63, 2**63 - 1], numpy.int64),
        "IN_FP16": numpy.array([0.5, -1.25], numpy.float16),
        "IN_FP32": numpy.array([1.5, float("inf")], numpy.float32),
        "IN_FP64": numpy.array([1e300, -0.0], numpy.float64),
        "IN_STRING": numpy.array([b"hello", b"", b"\x00\xffworld"], dtype=numpy.object_),
    }
    response = single(inproc("echo_all_types").infer(inputs=inputs))
    for name, sent in inputs.items():
        out = response.outputs["OUT_" + name[3:]]
        if name == "IN_STRING":
            assert out.to_bytes_array().tolist() == sent.tolist()
        else:
            got = as_numpy(out)
            assert got.dtype == sent.dtype and got.tolist() == sent.tolist(), name


def test_auto_complete_config_completes_the_config(inproc):
    model = inproc("auto_complete")
    config = model.config()
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [("INPUT0", "TYPE_FP32")]
    assert [(t["name"], t["data_type"]) for t in config["output"]] == [("OUTPUT0", "TYPE_FP32")]
    response = single(model.infer(inputs={"INPUT0": numpy.arange(3, dtype=numpy.float32)}))
    assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [0, 2, 4]


def test_request_parameters_reach_the_model(inproc):
    response = single(inproc("parameters").infer(inputs={"INPUT0": numpy.zeros(1, numpy.float32)},
                                                 parameters={"key": "value", "n": 3, "flag": True}))
    text = response.outputs["PARAMETERS"].to_bytes_array()[0]
    assert json.loads(text) == {"key": "value", "n": 3, "flag": True}


def test_inputs_reach_the_model_without_a_copy_and_a_kept_one_stays_valid(inproc):
    """Inputs over 64 KiB (smaller ones are copied when the request is
    built: test_request_inputs.py) reach the model as the client's memory."""
    model = inproc("input_address")
    large = BY_POINTER_FP32
    first = numpy.arange(large, dtype=numpy.float32)
    response = single(model.infer(inputs={"INPUT0": first}))
    # The model's as_numpy() is the client's own memory.
    assert int(as_numpy(response.outputs["ADDRESS"])[0]) == address(first)
    for step in range(3):
        data = numpy.full(large + step, step, dtype=numpy.float32)
        response = single(model.infer(inputs={"INPUT0": data}))
        # The previous request's input, kept by the model past its request,
        # still holds that request's values.
        expected = first if step == 0 else numpy.full(large + step - 1, step - 1, dtype=numpy.float32)
        numpy.testing.assert_array_equal(as_numpy(response.outputs["PREVIOUS"]), expected)
    # An input at an address its type is not aligned to is read in place too.
    odd = numpy.zeros(4 * large + 1, numpy.uint8)[1:].view(numpy.float32)
    odd[:] = numpy.arange(large)
    response = single(model.infer(inputs={"INPUT0": odd}))
    assert int(as_numpy(response.outputs["ADDRESS"])[0]) == address(odd) and address(odd) % 4 == 1
    response = single(model.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["PREVIOUS"]), numpy.arange(large, dtype=numpy.float32))
    # An empty input makes the model drop what it keeps (else it could not unload).
    single(model.infer(inputs={"INPUT0": numpy.zeros(0, numpy.float32)}))


def test_input_views_are_read_only_and_their_dlpack_exports_copies(backend_directory, tmp_path):
    """With ZERO_COPY_INPUTS "yes" an input's array is read-only (the
    request's memory: the client's array); to_dlpack() (the README's way
    into torch) and the __dlpack__ protocol still work: a legacy capsule
    cannot say "read-only", so it holds a copy (a consumer such as torch may
    write into what it got)."""
    zero_copy = 'parameters { key: "ZERO_COPY_INPUTS" value: { string_value: "yes" } }\n'
    python_model_repository(
        tmp_path, "writes_input",
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        for r in requests:\n"
        "            pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()[0] = 7\n"
        "        return []\n", extra_config=zero_copy)
    repo = python_model_repository(
        tmp_path, "dlpack_input",
        "import numpy as np\n"
        "import triton_python_backend_utils as pb_utils\n"
        "class Capsule:\n"
        "    def __init__(self, capsule):\n"
        "        self.capsule = capsule\n"
        "    def __dlpack__(self, **kwargs):\n"
        "        return self.capsule\n"
        "    def __dlpack_device__(self):\n"
        "        return (1, 0)\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        responses = []\n"
        "        for r in requests:\n"
        "            tensor = pb_utils.get_input_tensor_by_name(r, 'INPUT0')\n"
        "            taken = np.from_dlpack(Capsule(tensor.to_dlpack()))\n"
        "            seen = np.from_dlpack(tensor)\n"
        "            apart = taken.ctypes.data != tensor.as_numpy().ctypes.data\n"
        "            responses.append(pb_utils.InferenceResponse([\n"
        "                pb_utils.Tensor('OUTPUT0', taken + seen), pb_utils.Tensor('OUTPUT1', np.array([apart], np.float32))]))\n"
        "        return responses\n", extra_config=zero_copy)
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-ro", python_models="in-process",
                                              model_repository=str(repo), log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        server.load("writes_input")
        server.load("dlpack_input")
        a = numpy.ones(4, numpy.float32)
        with refused(tritonserver.InternalError, match="read-only"):
            single(server.model("writes_input").infer(inputs={"INPUT0": a, "INPUT1": a}))
        assert a.tolist() == [1, 1, 1, 1]  # the client's array is untouched
        response = single(server.model("dlpack_input").infer(inputs={"INPUT0": a, "INPUT1": a}))
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [2, 2, 2, 2]
        assert as_numpy(response.outputs["OUTPUT1"]).tolist() == [1]  # the capsule's memory is not the request's
    finally:
        server.stop()


def test_error_response_of_the_model(inproc):
    with refused(tritonserver.InternalError, match="raise_error model: deliberate failure"):
        single(inproc("raise_error").infer(inputs={"INPUT0": numpy.zeros(1, numpy.float32)}))


def test_exception_in_execute_fails_the_request_with_its_message(inproc):
    # Worded as the stub words it: the instance, the exception, where it was raised.
    with refused(tritonserver.InternalError,
                 match=r"Failed to process the request\(s\) for model 'execute_raises_0_0', message: ValueError: "
                       r"execute_raises model: bad batch of 1\n\nAt:\n  .*execute_raises/1/model.py\(\d+\): execute"):
        single(inproc("execute_raises").infer(inputs={"INPUT0": numpy.zeros(1, numpy.float32)}))


def test_exception_in_initialize_fails_the_load_with_its_message(inproc):
    # The core reports a failed load as InvalidArgumentError, naming the cause's code.
    with refused(tritonserver.InvalidArgumentError, match="Internal: RuntimeError: init_raises model: cannot start "
                                                   "init_raises_0_0\n\nAt:\n.*init_raises/1/model.py\\(\\d+\\): initialize"):
        inproc.server.load("init_raises")
    assert not inproc.server.model("init_raises").ready()


def test_decoupled_model_streams_its_responses(inproc):
    responses = list(inproc("streaming").infer(inputs={"COUNT": numpy.array([4], numpy.int32)}))
    values = [int(as_numpy(r.outputs["OUT"])[0]) for r in responses if "OUT" in r.outputs]
    assert values == [0, 1, 2, 3]
    assert responses[-1].final and not responses[-1].outputs
    assert all(not r.final for r in responses[:-1])
    assert all(r.error is None for r in responses)


def test_decoupled_model_with_no_responses(inproc):
    responses = list(inproc("streaming").infer(inputs={"COUNT": numpy.array([0], numpy.int32)}))
    assert len(responses) == 1 and responses[0].final and responses[0].error is None


def test_decoupled_cancellation_reaches_the_model(inproc):
    iterator = inproc("streaming").infer(inputs={"COUNT": numpy.array([100000], numpy.int32),
                                                 "DELAY_MS": numpy.array([1], numpy.int32)})
    first = next(iter(iterator))
    assert int(as_numpy(first.outputs["OUT"])[0]) == 0
    iterator.cancel()
    rest = []
    # The model saw is_cancelled(), stopped early and ended with its
    # "cancelled" error response.
    with refused(tritonserver.CancelledError, match="cancelled"):
        for response in iterator:
            rest.append(response)
    assert len(rest) < 100000


def test_stub_only_parameter_is_refused_at_load(backend_directory, tmp_path):
    # A server of its own: on the 2.51 core a failed reload of a loaded
    # model leaves stop() to hit exit_timeout (with the stub too).
    repo = python_model_repository(
        tmp_path, "env_path", (MODELS / "add_sub" / "1" / "model.py").read_text(),
        extra_config='parameters { key: "EXECUTION_ENV_PATH" value { string_value: "/tmp/env.tar.gz" } }\n')
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-env", python_models="in-process",
                                              model_repository=str(repo), log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        with refused(tritonserver.InvalidArgumentError,
                     match=r"Unsupported: model 'env_path': parameter EXECUTION_ENV_PATH is not supported .*python_models=\"stub\""):
            server.load("env_path")
    finally:
        server.stop()


def test_bls_runs_requests_on_other_models(inproc):
    inproc("add_sub")
    inproc("streaming")
    a = numpy.arange(5, dtype=numpy.float32)
    b = numpy.full(5, 3, dtype=numpy.float32)
    response = single(inproc("bls").infer(inputs={"INPUT0": a, "INPUT1": b,
                                                  "STREAM_COUNT": numpy.array([3], numpy.int32)}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), a + b)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), a - b)
    assert as_numpy(response.outputs["STREAMED"]).tolist() == [0, 1, 2]


def test_bls_error_of_the_called_model_reaches_the_caller(inproc):
    a = numpy.ones(2, numpy.float32)
    with refused(tritonserver.TritonError, match="no_such_model"):
        single(inproc("bls").infer(inputs={"INPUT0": a, "INPUT1": a,
                                           "TARGET": numpy.array([b"no_such_model"], dtype=numpy.object_)}))


def test_unload_calls_finalize_and_a_reload_imports_again(backend_directory, tmp_path):
    marker = tmp_path / "finalized.txt"
    repo = python_model_repository(
        tmp_path, "lifecycle",
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        "        self.name = args['model_instance_name']\n"
        "    def execute(self, requests):\n"
        "        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, 'INPUT0'),\n"
        "                pb_utils.Tensor('OUTPUT1', pb_utils.get_input_tensor_by_name(r, 'INPUT1').as_numpy())])\n"
        "                for r in requests]\n"
        "    def finalize(self):\n"
        f"        open({str(marker)!r}, 'a').write(self.name + '\\n')\n")
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-life", python_models="in-process",
                                              model_repository=str(repo), log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        server.load("lifecycle")
        server.unload("lifecycle", wait_until_unloaded=True, timeout=30)
        assert marker.read_text() == "lifecycle_0_0\n"
        assert not any(name.startswith("_triton_model_lifecycle") for name in sys.modules)
        server.load("lifecycle")
    finally:
        server.stop()
    assert marker.read_text() == "lifecycle_0_0\nlifecycle_0_0\n"


def test_models_import_our_triton_python_backend_utils(inproc):
    inproc("add_sub")
    from tritonserver._python_models import pb_utils

    assert sys.modules["triton_python_backend_utils"] is pb_utils


def test_main_module_reports_the_mode():
    import subprocess

    out = subprocess.run([sys.executable, "-m", "tritonserver"], cwd=ROOT / "tests", capture_output=True,
                         text=True, timeout=120).stdout
    assert "Python models: " in out and 'Options.python_models="auto"' in out, out


def test_model_metrics_and_logger(backend_directory, tmp_path, caplog):
    repo = python_model_repository(
        tmp_path, "counts",
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        "        # kept: as on the stub, deleting a family clears its metrics\n"
        "        MF = pb_utils.MetricFamily\n"
        "        self.family = MF('counts_requests', 'requests seen', MF.COUNTER)\n"
        "        self.metric = self.family.Metric(labels={'model': args['model_name']})\n"
        "    def execute(self, requests):\n"
        "        self.metric.increment(len(requests))\n"
        "        pb_utils.Logger.log_warn(f'counts: {self.metric.value():g} so far')\n"
        "        return [pb_utils.InferenceResponse([pb_utils.Tensor(f'OUTPUT{i}',\n"
        "                pb_utils.get_input_tensor_by_name(r, f'INPUT{i}').as_numpy()) for i in (0, 1)])\n"
        "                for r in requests]\n")
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-metrics",
                                              python_models="in-process", model_repository=str(repo),
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        model = server.load("counts")
        a = numpy.ones(2, numpy.float32)
        with caplog.at_level("WARNING", logger="tritonserver.models"):
            for _ in range(3):
                single(model.infer(inputs={"INPUT0": a, "INPUT1": a}))
        assert 'counts_requests{model="counts"} 3' in server.metrics()
        assert [r.getMessage() for r in caplog.records if r.name == "tritonserver.models"] == [
            "counts: 1 so far", "counts: 2 so far", "counts: 3 so far"]
    finally:
        server.stop()


def test_backend_library_links_neither_python_nor_the_core():
    from tritonserver._api._python_backend_layout import backend_library

    from tritonserver import _native

    assert hooks().elf_needed(_native.__file__), "the ELF reader read no NEEDED entries of the extension"
    needed = hooks().elf_needed(backend_library())
    assert not [n for n in needed if n.startswith(("libpython", "libtritonserver", "libcuda", "libcudart"))], needed


@pytest.mark.parametrize("case, source, decoupled, message", [
    ("dropped_sender",
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        for r in requests:\n"
     "            r.get_response_sender()\n",
     True, "': the response sender was deleted before it sent the final flag"),
    ("no_sender_used",
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        return None\n",
     True, "': execute\\(\\) gave no response for this request"),
    ("no_response_returned",
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        return None\n",
     False, r"': execute\(\) returned None, and this request got no final response through its response sender "
            r"before the model let go of both \(the python backend's stub leaves such a request unanswered\): return a "
            r"list of one InferenceResponse per request, or send each request's response with the flag "
            r"TRITONSERVER_RESPONSE_COMPLETE_FINAL"),
    ("none_in_the_list",
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        return [None] * len(requests)\n",
     False, r"': execute\(\) returned None in its list for this request, and this request got no final response "
            r"through its response sender before the model let go of both \(the python backend's stub leaves such a "
            r"request unanswered\)[^\n]*$"),
    ("wrong_count",
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        return []\n",
     False, r"_0_0', message: Number of InferenceResponse objects do not match the number of InferenceRequest "
            r"objects. InferenceRequest\(s\) size is:1, and InferenceResponse\(s\) size is:0"),
    ("decoupled_returns_a_list",
     "import triton_python_backend_utils as pb_utils\n"
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        return [pb_utils.InferenceResponse() for r in requests]\n",
     True, "_0_0', message: Python model 'decoupled_returns_a_list_0_0' is using the decoupled mode and the "
           "execute function must return None."),
])
def test_a_request_left_unanswered_gets_an_error_not_a_hang(backend_directory, tmp_path, case, source, decoupled,
                                                             message):
    repo = python_model_repository(tmp_path, case, source, decoupled)
    server = tritonserver.Server(make_options(backend_directory, server_id=f"inproc-{case}",
                                              python_models="in-process", model_repository=str(repo),
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        a = numpy.ones(2, numpy.float32)
        model = server.load(case)
        with refused(tritonserver.InternalError, match=f"model '{case}{message}"):
            call_with_deadline(lambda: list(model.infer(inputs={"INPUT0": a, "INPUT1": a})), 30)
    finally:
        server.stop()


LATER_SOURCE = """
import gc
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        self.kept = None  # what the first request left behind: its sender, or the request itself
    def execute(self, requests):
        request = requests[0]
        a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        if self.kept is None:
            self.kept = request.get_response_sender() if {keep!r} == "sender" else request
            return None
        if {answer!r}:
            sender = self.kept if {keep!r} == "sender" else self.kept.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a), pb_utils.Tensor("OUTPUT1", a)]),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        self.kept = None
        gc.collect()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a), pb_utils.Tensor("OUTPUT1", a)])]
"""


@pytest.mark.parametrize("keep, answer", [("sender", True), ("sender", False), ("request", True),
                                          ("request", False)])
def test_a_request_left_open_after_execute_is_answered_later_or_failed_when_let_go(backend_directory, tmp_path,
                                                                                   keep, answer):
    """A non-decoupled model returns None and keeps the request's sender (or
    the request): the request stays open, and the model answers it later
    (here from the next request's execute(), as the stub allows); when the
    model lets go of it unanswered, the client gets the error naming why
    (the stub leaves it waiting), not before."""
    name = f"later_{keep}_{answer}".lower()
    repo = python_model_repository(tmp_path, name, LATER_SOURCE.format(keep=keep, answer=answer))
    server = tritonserver.Server(make_options(backend_directory, server_id=f"inproc-{name}",
                                              python_models="in-process", model_repository=str(repo),
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        model = server.load(name)
        first = model.infer(inputs={"INPUT0": fp32(1), "INPUT1": fp32(1)}, raise_on_error=False)
        second = model.infer(inputs={"INPUT0": fp32(2), "INPUT1": fp32(2)}, raise_on_error=False)
        answers = [call_with_deadline(lambda: list(responses), 30) for responses in (first, second)]
        (late,), (own,) = answers
        assert own.error is None and as_numpy(own.outputs["OUTPUT0"]).tolist() == [2.0]
        if answer:
            assert late.error is None and as_numpy(late.outputs["OUTPUT0"]).tolist() == [2.0]
        else:
            assert isinstance(late.error, tritonserver.InternalError)
            assert str(late.error) == (
                f"model '{name}': execute() returned None, and this request got no final response through its "
                "response sender before the model let go of both (the python backend's stub leaves such a request "
                "unanswered): return a list of one InferenceResponse per request, or send each request's response "
                "with the flag TRITONSERVER_RESPONSE_COMPLETE_FINAL")
    finally:
        server.stop()


KEPT_OPEN_SOURCE = """
import sys
import threading
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        self.gate = sys.modules[{gate!r}]  # the test's events, in this process
        self.kept = []  # the senders, kept in the model's state
    def execute(self, requests):
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            sender = request.get_response_sender()
            if {decoupled!r}:  # a first response, not the last
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a), pb_utils.Tensor("OUTPUT1", a)]))
            self.kept.append(sender)
            threading.Thread(target=self.answer, args=(sender, a), daemon=True).start()
            self.gate.executed[int(a[0])].set()
        return None
    def answer(self, sender, a):
        value = int(a[0])
        try:
            if self.gate.answer[value].wait(60):
                response = pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a * 2), pb_utils.Tensor("OUTPUT1", a)])
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception as e:
            self.gate.refusals[value] = str(e)
        finally:
            self.gate.done[value].set()
"""


class _Gate:
    """The events of a KEPT_OPEN_SOURCE model's requests (by their INPUT0
    value, 1 or 2), shared with its test (the model finds the gate in
    sys.modules: it runs in this process): executed, told to answer, and
    done answering (the refusal of its answer, if any, in `refusals`)."""

    def __init__(self) -> None:
        self.executed, self.answer, self.done = ({v: threading.Event() for v in (1, 2)} for _ in range(3))
        self.refusals: dict[int, str] = {}

    def release(self) -> None:
        for event in self.answer.values():
            event.set()


_CLOSED = "Unable to send response. Response sender has been closed."


def _kept_open_server(backend_directory, tmp_path, monkeypatch, name: str, decoupled: bool):
    gate = _Gate()
    monkeypatch.setitem(sys.modules, f"tests_gate_{name}", gate)
    repo = python_model_repository(tmp_path, name, KEPT_OPEN_SOURCE.format(gate=f"tests_gate_{name}",
                                                                           decoupled=decoupled), decoupled)
    server = tritonserver.Server(make_options(backend_directory, server_id=f"inproc-{name}",
                                              python_models="in-process", model_repository=str(repo),
                                              log_error=False, exit_timeout=2))
    server.start(wait_until_ready=True, timeout=60)
    return server, gate


def _assert_failed_by_the_unload(name: str, answers: list, decoupled: bool) -> None:
    """A kept request's responses: the first one of a decoupled model, then
    the unload's error."""
    assert len(answers) == 1 + decoupled
    if decoupled:
        assert answers[0].error is None and as_numpy(answers[0].outputs["OUTPUT0"]).tolist() == [2.0]
    error = answers[-1].error
    assert isinstance(error, tritonserver.UnavailableError)
    assert str(error).startswith(f"model '{name}' was unloaded before it sent this request's final response (")


@pytest.mark.parametrize("decoupled", [False, True])
def test_an_unload_answers_the_requests_a_model_keeps_open(backend_directory, tmp_path, monkeypatch, decoupled):
    """A model that keeps a request's sender in its state and never sends
    the final flag does not hold up its unload (the stub's does, for good):
    past exit_timeout the request gets an error naming the model and why,
    and is released; the model's late answer is refused."""
    name = f"kept_open_{decoupled}".lower()
    server, gate = _kept_open_server(backend_directory, tmp_path, monkeypatch, name, decoupled)
    try:
        model = server.load(name)
        responses = model.infer(inputs={"INPUT0": fp32(2), "INPUT1": fp32(2)}, raise_on_error=False)
        assert gate.executed[2].wait(30)
        call_with_deadline(lambda: server.unload(name, wait_until_unloaded=True), 30)
        _assert_failed_by_the_unload(name, call_with_deadline(lambda: list(responses), 30), decoupled)
        gate.answer[2].set()  # too late: the sender's answer is refused
        assert gate.done[2].wait(30)
        assert gate.refusals == {2: _CLOSED}
    finally:
        gate.release()
        server.stop()


@pytest.mark.parametrize("decoupled", [False, True])
def test_a_stop_answers_the_requests_a_model_keeps_open(backend_directory, tmp_path, monkeypatch, decoupled):
    """A server's stop unloads its models likewise: past exit_timeout the
    kept request gets the unload's error (the core's stop would wait for it
    past its own timeout, leaving the server to the process's end)."""
    name = f"kept_at_stop_{decoupled}".lower()
    server, gate = _kept_open_server(backend_directory, tmp_path, monkeypatch, name, decoupled)
    try:
        model = server.load(name)
        responses = model.infer(inputs={"INPUT0": fp32(2), "INPUT1": fp32(2)}, raise_on_error=False)
        assert gate.executed[2].wait(30)
        # The request outlived exit_timeout: stop() says so, as for any
        # request, and the stop ends in the background.
        with refused(tritonserver.InternalError, match="Exit timeout expired"):
            call_with_deadline(server.stop, 30)
        _assert_failed_by_the_unload(name, call_with_deadline(lambda: list(responses), 30), decoupled)
    finally:
        gate.release()
        server.stop()


@pytest.mark.parametrize("decoupled", [False, True])
def test_a_kept_request_answered_during_the_unloads_drain_keeps_its_answer(backend_directory, tmp_path, monkeypatch,
                                                                           decoupled):
    """The unload waits for the kept requests (its drain, up to
    exit_timeout): the one the model answers meanwhile keeps its answer;
    the one it still keeps past it gets the unload's error."""
    name = f"kept_answered_{decoupled}".lower()
    server, gate = _kept_open_server(backend_directory, tmp_path, monkeypatch, name, decoupled)
    try:
        model = server.load(name)
        answered, left = (model.infer(inputs={"INPUT0": fp32(v), "INPUT1": fp32(v)}, raise_on_error=False)
                          for v in (1, 2))
        assert gate.executed[1].wait(30) and gate.executed[2].wait(30)
        unloading = threading.Thread(target=server.unload, args=(name,), kwargs={"wait_until_unloaded": True},
                                     daemon=True)
        unloading.start()
        call_with_deadline(lambda: [None for _ in iter(model.ready, False)], 30)  # the drain began
        gate.answer[1].set()
        answers = call_with_deadline(lambda: list(answered), 30)
        assert [a.error for a in answers] == [None] * (1 + decoupled)
        assert as_numpy(answers[-1].outputs["OUTPUT0"]).tolist() == [2.0]
        unloading.join(30)
        assert not unloading.is_alive(), "the unload waits for the request the model keeps"
        _assert_failed_by_the_unload(name, call_with_deadline(lambda: list(left), 30), decoupled)
        assert gate.done[1].wait(30) and 1 not in gate.refusals
    finally:
        gate.release()
        server.stop()


def test_async_execute_and_async_bls(backend_directory, tmp_path):
    source = (
        "import asyncio\n"
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    async def execute(self, requests):\n"
        "        await asyncio.sleep(0)\n"
        "        responses = []\n"
        "        for r in requests:\n"
        "            inputs = [pb_utils.get_input_tensor_by_name(r, n) for n in ('INPUT0', 'INPUT1')]\n"
        "            answer = await pb_utils.InferenceRequest(model_name='add_sub', inputs=inputs,\n"
        "                requested_output_names=['OUTPUT0', 'OUTPUT1']).async_exec()\n"
        "            responses.append(pb_utils.InferenceResponse(answer.output_tensors()))\n"
        "        return responses\n")
    repo = python_model_repository(tmp_path, "async_bls", source)
    shutil.copytree(MODELS / "add_sub", repo / "add_sub")
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-async", python_models="in-process",
                                              model_repository=str(repo), log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        server.load("add_sub")
        model = server.load("async_bls")
        a = numpy.arange(3, dtype=numpy.float32)
        response = single(call_with_deadline(lambda: list(model.infer(inputs={"INPUT0": a, "INPUT1": a})), 30))
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [0, 2, 4]
        assert as_numpy(response.outputs["OUTPUT1"]).tolist() == [0, 0, 0]
        del response
    finally:
        server.stop()


def test_outputs_that_are_views(backend_directory, tmp_path):
    """Outputs are read in place from the model's arrays: a strided or
    reversed view is sent with its values in order (copied once)."""
    views = (
        "import numpy as np\n"
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        out = []\n"
        "        for r in requests:\n"
        "            a = pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()\n"
        "            wide = np.repeat(a, 2)\n"
        "            out.append(pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT0', a[::-1]),\n"
        "                                                   pb_utils.Tensor('OUTPUT1', wide[::2])]))\n"
        "        return out\n")
    repo = python_model_repository(tmp_path, "views", views)
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-output-views",
                                              python_models="in-process", model_repository=str(repo),
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        a = numpy.arange(5, dtype=numpy.float32)
        model = server.load("views")
        for _ in range(2):
            outputs = single(model.infer(inputs={"INPUT0": a, "INPUT1": a})).outputs
            numpy.testing.assert_array_equal(as_numpy(outputs["OUTPUT0"]), a[::-1])
            numpy.testing.assert_array_equal(as_numpy(outputs["OUTPUT1"]), a)
    finally:
        server.stop()


_THREAD_PROBE = (
    "import threading\n"
    "import triton_python_backend_utils as pb_utils\n"
    "THREADS = []\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        THREADS.append(threading.current_thread().name)\n"
    "        responses = []\n"
    "        for r in requests:\n"
    "            a = pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()\n"
    "            b = pb_utils.get_input_tensor_by_name(r, 'INPUT1').as_numpy()\n"
    "            responses.append(pb_utils.InferenceResponse(\n"
    "                [pb_utils.Tensor('OUTPUT0', a + b), pb_utils.Tensor('OUTPUT1', a - b)]))\n"
    "        return responses\n")


def test_a_backlog_runs_on_the_instances_own_thread_and_a_lone_request_on_the_cores(backend_directory, tmp_path):
    """A one-instance model without a batcher hands requests that arrive
    while others are in flight to its own Python thread, which runs them in
    turn under one hold of the GIL (cpp/python_backend/instance_worker.h); a request sent
    alone runs on the core's thread. Every request gets its own answer
    either way; unloading with a backlog runs it first and ends the thread.
    A model of two instances never hands off (the core spreads requests
    over the instances that are free)."""
    repo = python_model_repository(tmp_path, "probe", _THREAD_PROBE)
    (repo / "probe2" / "1").mkdir(parents=True)
    (repo / "probe2" / "config.pbtxt").write_text(
        (repo / "probe" / "config.pbtxt").read_text().replace('"probe"', '"probe2"').replace("count: 1", "count: 2"))
    (repo / "probe2" / "1" / "model.py").write_text(_THREAD_PROBE)
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc-handoff", python_models="in-process",
                                              model_repository=str(repo), log_error=False))
    server.start(wait_until_ready=True, timeout=60)

    def worker_threads(name: str) -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith(f"tritonserver model {name}_")]

    def threads_seen(name: str) -> list[str]:
        return next(m for key, m in sys.modules.items() if key.startswith(f"_triton_model_{name}_")).THREADS

    async def concurrently(model: tritonserver.Model, count: int) -> list[tritonserver.InferenceResponse]:
        async def one(i: int) -> tritonserver.InferenceResponse:
            x = numpy.full(4, i, numpy.float32)
            return [r async for r in model.async_infer(inputs={"INPUT0": x, "INPUT1": x})][-1]

        return await asyncio.gather(*[one(i) for i in range(count)])

    try:
        probe, probe2 = server.load("probe"), server.load("probe2")
        assert len(worker_threads("probe")) == 1 and not worker_threads("probe2")
        x = numpy.ones(4, numpy.float32)
        for _ in range(3):
            assert as_numpy(single(probe.infer(inputs={"INPUT0": x, "INPUT1": x})).outputs["OUTPUT0"]).tolist() == [2] * 4
        assert len(threads_seen("probe")) == 3 and not any(n.startswith("tritonserver") for n in threads_seen("probe"))
        for model in (probe, probe2):
            responses = call_with_deadline(lambda: asyncio.run(concurrently(model, 64)), 60)
            for i, response in enumerate(responses):
                assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [2 * i] * 4
                assert as_numpy(response.outputs["OUTPUT1"]).tolist() == [0] * 4
            del responses
        handed = [n for n in threads_seen("probe")[3:] if n.startswith("tritonserver model probe_")]
        assert handed, f"no request of 64 in flight ran on the instance's thread: {threads_seen('probe')}"
        assert not any(n.startswith("tritonserver") for n in threads_seen("probe2"))
        # Unloading with a backlog: every request is answered, then the thread ends.
        [worker] = worker_threads("probe")
        seen = threads_seen("probe")

        async def unload_under_load() -> list[tritonserver.InferenceResponse]:
            inputs = [numpy.full(4, i, numpy.float32) for i in range(64)]
            iterators = [probe.async_infer(inputs={"INPUT0": x, "INPUT1": x}) for x in inputs]  # submitted
            unloading = asyncio.to_thread(server.unload, "probe", wait_until_unloaded=True, timeout=60)

            async def last(iterator: tritonserver.AsyncResponseIterator) -> tritonserver.InferenceResponse:
                return [r async for r in iterator][-1]

            *responses, _ = await asyncio.gather(*[last(it) for it in iterators], unloading)
            return responses

        before = len(seen)
        responses = call_with_deadline(lambda: asyncio.run(unload_under_load()), 90)
        assert [as_numpy(r.outputs["OUTPUT0"]).tolist() for r in responses] == [[2 * i] * 4 for i in range(64)]
        assert len(seen) - before == 64
        worker.join(30)
        assert not worker.is_alive()
    finally:
        server.stop()


def test_each_kind_of_response_is_sent_by_its_own_rules(backend_directory, tmp_path):
    """execute()'s responses are sent natively when they are plain
    InferenceResponse objects and by the runtime otherwise: an error
    response, a subclass, response parameters and an output the config
    does not declare each reach the client as the stub would send them, and
    the model keeps serving."""
    source = (
        "import triton_python_backend_utils as pb_utils\n"
        "class Mine(pb_utils.InferenceResponse):\n"
        "    pass\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        out = []\n"
        "        for r in requests:\n"
        "            a = pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()\n"
        "            kind = int(a[0])\n"
        "            tensors = [pb_utils.Tensor('OUTPUT0', a + 1), pb_utils.Tensor('OUTPUT1', a - 1)]\n"
        "            if kind == 1:\n"
        "                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError('kind 1 refused', "
        "pb_utils.TritonError.INVALID_ARG)))\n"
        "            elif kind == 2:\n"
        "                out.append(Mine(tensors))\n"
        "            elif kind == 3:\n"
        "                out.append(pb_utils.InferenceResponse(tensors, parameters={'kind': 3, 'name': 'three'}))\n"
        "            elif kind == 4:\n"
        "                out.append(pb_utils.InferenceResponse([pb_utils.Tensor('UNDECLARED', a)]))\n"
        "            else:\n"
        "                out.append(pb_utils.InferenceResponse(tensors))\n"
        "        return out\n")
    repo = python_model_repository(tmp_path, "kinds", source)
    with dedicated_server(backend_directory, "inproc-response-kinds", ["kinds"], python_models="in-process",
                          model_repository=str(repo)) as server:
        model = server.model("kinds")

        def infer(kind: int) -> tritonserver.InferenceResponse:
            a = numpy.full(4, kind, dtype=numpy.float32)
            return single(call_with_deadline(lambda: list(model.infer(inputs={"INPUT0": a, "INPUT1": a})), 30))

        for kind in (0, 2, 3):
            outputs = infer(kind).outputs
            assert as_numpy(outputs["OUTPUT0"]).tolist() == [kind + 1] * 4
            assert as_numpy(outputs["OUTPUT1"]).tolist() == [kind - 1] * 4
        assert infer(3).parameters == {"kind": 3, "name": "three"}
        with refused(tritonserver.InvalidArgumentError, match="kind 1 refused"):
            infer(1)
        assert dict(infer(4).outputs) == {}
        assert as_numpy(infer(0).outputs["OUTPUT0"]).tolist() == [1] * 4


def test_a_failing_model_writes_nothing_to_stderr_unless_logging_is_configured(backend_directory, tmp_path):
    # The stub writes a failed batch's message to Triton's log (off by
    # default); in-process it is a record on "tritonserver.models", which a
    # program without logging handlers must not see on stderr (Python's
    # last-resort handler). With a handler configured, the record is there.
    code = f"""
        import logging, os, numpy, tritonserver
        from common import make_options
        if os.environ.get("CONFIGURE_LOGGING"):
            logging.basicConfig(level=logging.ERROR, format="LOGGED %(name)s %(message).60s")
        with tritonserver.Server(make_options({backend_directory!r}, server_id="quiet", python_models="in-process",
                                              log_error=False)) as server:
            model = server.load("execute_raises")
            for _ in range(3):
                try:
                    list(model.infer(inputs={{"INPUT0": numpy.zeros(1, numpy.float32)}}))
                except tritonserver.InternalError as e:
                    print("REFUSED", "execute_raises model: bad batch" in str(e))
    """
    for configured in (False, True):
        rc, out, err = run_script(code, tmp_path, 120, env={"CONFIGURE_LOGGING": "1" if configured else ""})
        assert rc == 0 and out.splitlines() == ["REFUSED True"] * 3, (out, err)
        logged = [line for line in err.splitlines() if line.startswith("LOGGED tritonserver.models Failed")]
        if configured:
            assert len(logged) == 3, err
        else:
            assert err == "", err
