"""The python backend's model API as a model sees it, in-process as on the
2.51 stub: Logger and its levels, BLS requests (a model name given as
bytes, trace(), checked arguments), the response sender's checks and
messages, the errors of what execute() returns, and the rest of the stub's
pb_utils surface. The same models run on the stub (numpy<2) to pin that the
behaviour is the stub's."""

from __future__ import annotations

import json
import logging

import numpy
import pytest

from common import call_with_deadline, dedicated_server

# The stub's behaviour is the reference: the same models run there too.
MODES = ["in-process", pytest.param("stub", marks=pytest.mark.python_stub)]

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "CASE" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

# Each request's CASE names what the model does; it answers with what it
# saw as JSON (OUT), or records it for the "report" case when the case
# itself sends the request's one response. A decoupled model ("streamer")
# runs the same code.
MODEL = r'''
import json
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
SEEN = []


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(value)], dtype=object))])


def outcome(fn):
    """"ok" and what fn() gave, or the exception: whether it is
    pb_utils.TritonModelException, its class name and message."""
    try:
        return ["ok", repr(fn())]
    except Exception as e:
        return [type(e) is pb_utils.TritonModelException, type(e).__name__, str(e)]


def bls(name="echo", **kwargs):
    """A BLS request to `name` with CASE "echo"."""
    kwargs.setdefault("requested_output_names", ["OUT"])
    return pb_utils.InferenceRequest(
        model_name=name, inputs=[pb_utils.Tensor("CASE", np.array([b"echo"], dtype=object))], **kwargs)


def answer(response):
    """The OUT of a BLS response, or its error's message."""
    if response.has_error():
        return "error: " + response.error().message()
    return json.loads(pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0])


class TritonPythonModel:
    def initialize(self, args):
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
        self.model_dir = pb_utils.get_model_dir()

    def execute(self, requests):
        results = []
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            result = None
            L = pb_utils.Logger
            if case == "echo":
                result = out("echo")
            elif case == "logger":
                L.log("api-test info")
                L.log("api-test warning", L.WARNING)
                L.log("api-test error", level=L.LogLevel.ERROR)
                L.log("api-test verbose", L.VERBOSE)
                L.log_warn("api-test warn")
                result = out({
                    "levels": [repr(level) for level in (L.INFO, L.WARNING, L.ERROR, L.VERBOSE)],
                    "names": [L.INFO.name, str(L.WARNING)],
                    "numbers": [int(L.VERBOSE), L.ERROR.value, L.INFO == 0, L.LogLevel.WARNING is L.WARNING],
                    "int_level": outcome(lambda: L.log("api-test int", 1))[1],
                })
            elif case == "bls":
                name = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0][:0] + b"echo"
                trace = request.trace()
                first = bls(name)
                first.set_flags(0)
                result = out({
                    "bytes_name": answer(bls(name).exec()),
                    "numpy_bytes_name": answer(bls(np.bytes_(b"echo")).exec()),
                    "bytes_request_id": bls(request_id=b"id-1").request_id(),
                    "trace": [type(trace).__name__, trace.get_context()],
                    "traced": answer(bls(trace=trace).exec()),
                    "bad_trace": outcome(lambda: bls(trace="x"))[1],
                    "preferred": answer(bls(preferred_memory=pb_utils.PreferredMemory(
                        pb_utils.TRITONSERVER_MEMORY_CPU, 0)).exec()),
                    "memory_types": [int(pb_utils.TRITONSERVER_MEMORY_GPU), int(pb_utils.TRITONSERVER_MEMORY_CPU)],
                    "set_flags": [first.flags(), (first.set_flags(3), first.flags())[1]],
                    "bad_key": outcome(lambda: bls(parameters={1: "x"})),
                    "bad_value": outcome(lambda: bls(parameters={"a": 1.5})),
                    "bad_correlation_id": outcome(lambda: bls(correlation_id=1.5)),
                    "empty_output_name": outcome(lambda: bls(requested_output_names=[""])),
                })
            elif case == "control":  # "spare" loaded, used, unloaded
                def wait_until(ready):
                    for _ in range(2000):
                        if pb_utils.is_model_ready("spare") == ready:
                            return True
                        time.sleep(0.005)
                    return False

                before = pb_utils.is_model_ready("spare")
                pb_utils.load_model("spare")
                result = {
                    "model_dir": [self.model_dir == pb_utils.get_model_dir(),
                                  self.model_dir == os.path.dirname(os.path.abspath(__file__))],
                    "ready": [before, pb_utils.is_model_ready("spare"), pb_utils.is_model_ready("spare", "1"),
                              pb_utils.is_model_ready("spare", "2")],
                    "served": answer(bls("spare").exec()),
                    "bad_version": outcome(lambda: pb_utils.is_model_ready("echo", "x")),
                    "negative_version": outcome(lambda: pb_utils.is_model_ready("echo", "-1")),
                    "bad_files": outcome(lambda: pb_utils.load_model("echo", files=["x"])),
                    "unknown": outcome(lambda: pb_utils.load_model("no_such_model")),
                }
                pb_utils.unload_model("spare")
                result["unloaded"] = wait_until(False)
                result = out(result)
            elif case == "model_config":  # the ModelConfig auto_complete_config() gets, built here
                def config(**extra):
                    return pb_utils.ModelConfig(json.dumps(dict({
                        "name": "ac", "max_batch_size": 4,
                        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [-1], "optional": False}],
                        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]}]}, **extra)))
                c = config()
                result = {key: outcome(call) for key, call in {
                    "mbs_lower": lambda: c.set_max_batch_size(2),
                    "mbs_str": lambda: c.set_max_batch_size("8"),
                    "dynamic": lambda: (c.set_dynamic_batching(), c.set_dynamic_batching()),
                    "dynamic_sequence": lambda: config(sequence_batching={}).set_dynamic_batching(),
                    "dynamic_ensemble": lambda: config(ensemble_scheduling={}).set_dynamic_batching(),
                    "in_same": lambda: c.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [-1]}),
                    "in_dtype": lambda: c.add_input({"name": "IN", "data_type": "FP32", "dims": [-1]}),
                    "in_dims": lambda: c.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": (3,)}),
                    "in_optional": lambda: c.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [-1],
                                                        "optional": True}),
                    "in_no_name": lambda: c.add_input({"data_type": "TYPE_FP32", "dims": [1]}),
                    "in_no_dtype": lambda: c.add_input({"name": "A", "dims": [1]}),
                    "in_no_dims": lambda: c.add_input({"name": "B", "data_type": "TYPE_FP32"}),
                    "in_extra": lambda: c.add_input({"name": "C", "data_type": "TYPE_FP32", "dims": [1], "x": 1}),
                    "in_extra_no_name": lambda: c.add_input({"x": 1}),
                    "in_list": lambda: c.add_input(["D"]),
                    "in_int_name": lambda: c.add_input({"name": 5, "data_type": "TYPE_FP32"}),
                    "in_new": lambda: c.add_input({"name": "E", "data_type": "TYPE_INT8", "dims": [2]}),
                    "out_optional": lambda: c.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [1],
                                                          "optional": True}),
                    "out_no_name": lambda: c.add_output({"data_type": "TYPE_FP32", "dims": [1]}),
                    "out_dtype": lambda: c.add_output({"name": "OUT", "data_type": "TYPE_INT64", "dims": [-1]}),
                    "out_dims": lambda: c.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}),
                    "policy": lambda: c.set_model_transaction_policy({"decoupled": False}),
                    "policy_other": lambda: c.set_model_transaction_policy({"bogus": True}),
                    "policy_change": lambda: c.set_model_transaction_policy({"decoupled": True}),
                }.items()}
                result["config"] = c.as_dict()
                result = out(result)
            elif case == "metrics":  # the families' names are this test's alone
                MF = pb_utils.MetricFamily
                counter = MF("model_api_counter", "c", MF.COUNTER)
                metric = counter.Metric(labels={"k": "v"})
                orphan = MF("model_api_orphan", "o", MF.GAUGE).Metric(labels={"k": "v"})  # family deleted
                result = out({key: outcome(call) for key, call in {
                    "bad_name": lambda: MF("not a valid name!", "x", MF.COUNTER),
                    "other_kind": lambda: MF("model_api_counter", "c", MF.GAUGE),
                    "negative": lambda: metric.increment(-1),
                    "set_counter": lambda: metric.set(3),
                    "incremented": lambda: (metric.increment(2), metric.value())[1],
                    "label_int": lambda: counter.Metric(labels={"k": 1}),
                    "label_list": lambda: counter.Metric(labels=["a"]),
                    "label_set": lambda: counter.Metric(labels={"k": {1}}),
                    "label_name": lambda: counter.Metric(labels={"not a label!": "v"}),
                    "buckets": lambda: counter.Metric(buckets=[1.0]),
                    "buckets_tuple": lambda: counter.Metric(buckets=(1.0,)),
                    "orphan_set": lambda: orphan.set(1),
                    "orphan_value": lambda: orphan.value(),
                }.items()})
            elif case == "report":
                result = out(SEEN[:])
                SEEN.clear()
            elif case == "after_final":
                sender.send(out("first"), FINAL)
                SEEN.append(outcome(lambda: sender.send(out("second"))))
                SEEN.append(outcome(lambda: sender.send(flags=FINAL)))
            elif case == "two":
                sender.send(out("first"))
                SEEN.append(outcome(lambda: sender.send(out("second"))))
                SEEN.append(outcome(lambda: sender.send(flags=FINAL)))
                SEEN.append(outcome(lambda: sender.send(flags=FINAL)))
            elif case == "final_first":
                SEEN.append(outcome(lambda: sender.send(flags=FINAL)))
                sender.send(out("then"), FINAL)
            elif case == "arguments":
                SEEN.append(outcome(lambda: sender.send()))
                SEEN.append(outcome(lambda: sender.send(out("x"), flags=2)))
                sender.send(out("then"), FINAL)
            elif case == "kept":  # returned; the sender kept for the next request
                self.kept = sender
                result = out("returned")
            elif case == "use_kept":
                SEEN.append(outcome(lambda: self.kept.send(out("x"))))
                SEEN.append(outcome(lambda: self.kept.send(flags=FINAL)))
                del self.kept  # (a kept sender would hold up the unload in-process)
                result = out("used")
            elif case == "return_list":
                return [out("returned")]
            elif case == "return_tuple":
                return (out("returned"),)
            elif case == "return_short":
                return []
            elif case == "return_other":
                return ["returned"]
            if self.decoupled:
                if result is not None:
                    sender.send(result, FINAL)
            elif case not in ("after_final", "two", "final_first", "arguments"):
                results.append(result)
            else:
                results.append(None)
        return None if self.decoupled else results
'''


@pytest.fixture(scope="module", params=MODES)
def server(request, backend_directory, tmp_path_factory):
    """A server running the api-test models ("api": non-decoupled,
    "streamer": decoupled, "echo": the BLS target; "spare", not loaded, for
    the model control case) in `request.param` mode."""
    mode = request.param
    repo = tmp_path_factory.mktemp(f"model_api_{mode}")
    for name, decoupled in (("api", False), ("streamer", True), ("echo", False), ("spare", False)):
        (repo / name / "1").mkdir(parents=True)
        config = CONFIG.format(name=name)
        if decoupled:
            config += "model_transaction_policy { decoupled: true }\n"
        (repo / name / "config.pbtxt").write_text(config)
        (repo / name / "1" / "model.py").write_text(MODEL)
    with dedicated_server(backend_directory, f"model-api-{mode}", ["api", "streamer", "echo"], python_models=mode,
                          model_repository=str(repo)) as srv:
        assert srv.python_models == mode
        yield srv


def run(server, model: str, case: str) -> list[tuple[bool, str | None, object]]:
    """Each response of a request of `case`: (final, error message or
    None, OUT decoded)."""
    def responses():
        seen = []
        inputs = {"CASE": numpy.array([case.encode()], dtype=numpy.object_)}
        for response in server.model(model).infer(inputs=inputs, raise_on_error=False):
            value = None
            if "OUT" in response.outputs:
                value = json.loads(response.outputs["OUT"].to_bytes_array().tolist()[0])
            seen.append((response.final, None if response.error is None else str(response.error), value))
        return seen
    return call_with_deadline(responses, 60)


def answer(server, model: str, case: str):
    """The one response's OUT."""
    [(final, error, value)] = run(server, model, case)
    assert final and error is None, error
    return value


def test_logger_has_the_stubs_levels(server, caplog):
    """Logger.INFO .. Logger.VERBOSE (members of Logger.LogLevel, equal to
    their numbers), Logger.log(message, level) with a level, and a plain
    int refused (TypeError), as on the stub; in-process the messages reach
    the `tritonserver.models` logger at their levels."""
    with caplog.at_level(logging.DEBUG, logger="tritonserver.models"):
        seen = answer(server, "api", "logger")
    assert seen == {"levels": ["<LogLevel.INFO: 0>", "<LogLevel.WARNING: 1>", "<LogLevel.ERROR: 2>",
                               "<LogLevel.VERBOSE: 3>"],
                    "names": ["INFO", "LogLevel.WARNING"], "numbers": [3, 2, True, True], "int_level": "TypeError"}
    if server.python_models == "in-process":
        logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.getMessage().startswith("api-test")]
        assert logged == [("INFO", "api-test info"), ("WARNING", "api-test warning"), ("ERROR", "api-test error"),
                          ("DEBUG", "api-test verbose"), ("WARNING", "api-test warn")]
        assert {r.filename for r in caplog.records if r.getMessage().startswith("api-test")} == {"model.py"}


def test_bls_requests_take_the_stubs_arguments(server):
    """A model name (or request id) given as bytes, e.g. read from a BYTES
    input, names the model as its text does; request.trace() (no context
    without tracing) passes on to a BLS request; PreferredMemory and
    set_flags() are taken; bad parameters, correlation ids and output names
    are refused with the stub's TritonModelException and words."""
    seen = answer(server, "api", "bls")
    assert seen["bytes_name"] == seen["numpy_bytes_name"] == seen["traced"] == seen["preferred"] == "echo"
    assert seen["bytes_request_id"] == "id-1"
    assert seen["trace"] == ["InferenceTrace", None]
    assert seen["bad_trace"] == "TypeError"
    assert seen["memory_types"] == [0, 1]
    assert seen["set_flags"] == [0, 3]
    assert seen["bad_key"] == [True, "TritonModelException",
                               "Expect parameters keys to have type str, found type <class 'int'>"]
    assert seen["bad_value"] == [True, "TritonModelException",
                                 "Expect parameters values to have type bool/int/str, found type <class 'float'>"]
    assert seen["bad_correlation_id"] == [True, "TritonModelException", "Correlation ID must be integer or string"]
    assert seen["empty_output_name"] == [
        True, "TritonModelException",
        "Requested output name for request with id '' and model name 'echo' should not be empty."]


CLOSED = [True, "TritonModelException", "Unable to send response. Response sender has been closed."]
MORE_THAN_ONE = [True, "TritonModelException",
                 "Unable to send response. Non-decoupled model cannot send more than one response."]


def test_a_non_decoupled_models_sender_refuses_as_the_stubs_does(server):
    """One response, then the final flag alone: anything else raises the
    stub's TritonModelException with its words, the request answered with
    what was sent."""
    assert run(server, "api", "after_final") == [(True, None, "first")]
    assert run(server, "api", "two") == [(False, None, "first"), (True, None, None)]
    assert run(server, "api", "final_first") == [(True, None, "then")]
    assert run(server, "api", "arguments") == [(True, None, "then")]
    assert run(server, "api", "kept") == [(True, None, "returned")]
    assert run(server, "api", "use_kept") == [(True, None, "used")]
    assert answer(server, "api", "report") == [
        MORE_THAN_ONE, CLOSED,  # after_final
        MORE_THAN_ONE, ["ok", "None"], CLOSED,  # two
        [True, "TritonModelException",
         "Unable to send response. Non-decoupled model cannot send complete final before sending a response."],
        [True, "TritonModelException",
         "Inference Response object must be provided when the response flags is set to zero."],
        [True, "TritonModelException", "Unable to send response. Unsupported flag provided."],
        MORE_THAN_ONE, CLOSED,  # a sender kept past a returned response
    ]


def test_a_decoupled_models_sender_refuses_after_the_final_flag(server):
    assert run(server, "streamer", "after_final") == [(True, None, "first")]
    assert run(server, "streamer", "final_first") == [(True, None, None)]
    assert answer(server, "streamer", "report") == [CLOSED, CLOSED, ["ok", "None"]]


def _failed(instance: str, why: str) -> list:
    return [(True, f"Failed to process the request(s) for model '{instance}', message: {why}", None)]


def test_what_execute_returns_is_checked_as_the_stub_checks_it(server):
    """A decoupled model returns None; a non-decoupled one a list of one
    InferenceResponse (or None) per request: else every request of the
    batch gets the stub's error, in its words."""
    assert run(server, "streamer", "return_list") == _failed(
        "streamer_0_0", "Python model 'streamer_0_0' is using the decoupled mode and the execute function must "
        "return None.")
    assert run(server, "api", "return_tuple") == _failed(
        "api_0_0", "Expected a list in the execute return, found type '<class 'tuple'>'.")
    assert run(server, "api", "return_short") == _failed(
        "api_0_0", "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
        "InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0\n")
    assert run(server, "api", "return_other") == _failed(
        "api_0_0", "Expected an 'InferenceResponse' object in the execute function return list, found type "
        "'<class 'str'>'.")
    assert answer(server, "api", "echo") == "echo"  # still serving


def test_a_model_controls_the_models_of_its_server(server):
    """get_model_dir() (the model's version folder), is_model_ready(),
    load_model() and unload_model() from a model, as on the stub: the
    model it loads serves BLS, then unloads; bad versions and files are
    refused with the stub's words, an unknown model with the core's error
    as TritonModelException. (The texts are the stub's, seen on it once: a
    stub model that loads another python model aborted the host in 2 of 3
    runs here, the 2.51 python backend throwing
    boost::interprocess::lock_exception, so the stub is left out.)"""
    if server.python_models == "stub":
        pytest.skip("the 2.51 python backend aborts the process (boost::interprocess::lock_exception) when a stub "
                    "model loads another python model")
    seen = answer(server, "api", "control")
    assert seen["model_dir"] == [True, True]
    assert seen["ready"] == [False, True, True, False]
    assert seen["served"] == "echo"
    assert seen["unloaded"] is True
    refused = "Failed to check model readiness: Failed to process the request for model 'api_0_0', message: "
    assert seen["bad_version"] == [
        True, "TritonModelException", refused + "failed to get model version from specified version string 'x' "
        "(details: stol), version should be an integral value > 0"]
    assert seen["negative_version"] == [
        True, "TritonModelException", refused + "failed to get model version from specified version string '-1', "
        "version should be an integral value > 0"]
    assert seen["bad_files"] == [
        True, "TritonModelException",
        "failed to load model 'echo', files should be a dictionary of file paths and file contents"]
    assert seen["unknown"][:2] == [True, "TritonModelException"]
    assert seen["unknown"][2].startswith("Failed to load model: Failed to process the request for model 'api_0_0', "
                                         "message: ") and "no_such_model" in seen["unknown"][2]


def _value_error(text: str) -> list:
    return [False, "ValueError", text]


def test_model_config_checks_as_the_stubs_does(server):
    """pb_utils.ModelConfig (what auto_complete_config() gets) refuses what
    contradicts the config with the stub's ValueError texts, checked in its
    order, and fails with its TypeError or KeyError where an argument is not
    what it indexes (an input given as a list, a name that is not a str)."""
    seen = answer(server, "api", "model_config")
    where = " in auto-complete-config function for model 'ac'"
    assert seen.pop("config") == {
        "name": "ac", "max_batch_size": 4, "dynamic_batching": {}, "model_transaction_policy": {"decoupled": False},
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [-1], "optional": False},
                  {"name": "E", "data_type": "TYPE_INT8", "dims": [2]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]}]}
    assert seen == {
        "mbs_lower": _value_error("configuration specified max_batch_size 4, but" + where + " specified "
                                  "max_batch_size 2"),
        "mbs_str": [False, "TypeError", "'>' not supported between instances of 'int' and 'str'"],
        "dynamic": ["ok", "(None, None)"],
        "dynamic_sequence": _value_error(
            "Configuration specified scheduling_choice as 'sequence_batching', but auto-complete-config function "
            "for model 'ac' tries to set scheduling_choice as 'dynamic_batching'"),
        "dynamic_ensemble": _value_error(
            "Configuration specified scheduling_choice as 'ensemble_scheduling', but auto-complete-config "
            "function for model 'ac' tries to set scheduling_choice as 'dynamic_batching'"),
        "in_same": ["ok", "None"],
        "in_dtype": _value_error("unable to load model 'ac', configuration expects datatype TYPE_FP32 for input "
                                 "'IN', model provides FP32"),
        "in_dims": _value_error("model 'ac', tensor 'IN': the model expects dims (3,) but the model configuration "
                                "specifies dims [-1]"),
        "in_optional": _value_error("model 'ac', tensor 'IN': the model expects optional True but the model "
                                    "configuration specifies optional False"),
        "in_no_name": _value_error("input" + where + " is missing 'name' property."),
        "in_no_dtype": _value_error("input 'A'" + where + " is missing 'data_type' property."),
        "in_no_dims": _value_error("input 'B'" + where + " is missing 'dims' property."),
        "in_extra": _value_error("input 'C'" + where + " contains property other than 'name', 'data_type', 'dims' "
                                 "and 'optional'."),
        "in_extra_no_name": [False, "KeyError", "'name'"],
        "in_list": [False, "TypeError", "list indices must be integers or slices, not str"],
        "in_int_name": [False, "TypeError", 'can only concatenate str (not "int") to str'],
        "in_new": ["ok", "None"],
        "out_optional": _value_error("output 'O'" + where + " contains property other than 'name', 'data_type' and "
                                     "'dims'."),
        "out_no_name": _value_error("output" + where + " is missing 'name' property."),
        "out_dtype": _value_error("unable to load model 'ac', configuration expects datatype TYPE_FP32 for output "
                                  "'OUT', model provides TYPE_INT64"),
        "out_dims": _value_error("model 'ac', tensor 'OUT': the model expects dims [2] but the model "
                                 "configuration specifies dims [-1]"),
        "policy": ["ok", "None"],
        "policy_other": _value_error("model transaction property" + where + " contains property other than "
                                     "'decoupled'."),
        "policy_change": _value_error("trying to change decoupled property in auto-complete-config for model 'ac', "
                                      "which is already set to 'False'."),
    }


def test_metrics_refuse_as_the_stubs_do(server):
    """What the core refuses of a MetricFamily or Metric (a bad or taken
    name, a negative increment or set() of a counter, a label name) raises
    the stub's TritonModelException with its words; labels are checked as
    the stub checks them, buckets refused for counters, and a metric whose
    family was deleted refuses its calls. (The texts are the stub's, seen on
    it: the 2.51 python backend aborted the process at unload in 1 of 2 runs
    here, throwing boost::interprocess::lock_exception, once a stub model
    made metrics, so the stub is left out.)"""
    if server.python_models == "stub":
        pytest.skip("the 2.51 python backend aborts the process (boost::interprocess::lock_exception) at unload "
                    "when a stub model made metrics")
    seen = answer(server, "api", "metrics")
    parent = "Failed to process the request for model 'api_0_0', message: "
    refused = [True, "TritonModelException"]
    orphaned = ("Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The 'MetricFamily' "
                "object should be deleted AFTER its corresponding 'Metric' objects have been deleted.")
    assert seen == {
        "bad_name": refused + ["Error when creating MetricFamily: " + parent + "Invalid metric name"],
        "other_kind": refused + ["Error when creating MetricFamily: " + parent + "Family name already exists with "
                                 "different type"],
        "negative": refused + ["Failed to increment metric value: " + parent + "TRITONSERVER_METRIC_KIND_COUNTER "
                               "can only be incremented monotonically by non-negative values."],
        "set_counter": refused + ["Failed to set metric value: " + parent + "TRITONSERVER_METRIC_KIND_COUNTER does "
                                  "not support Set"],
        "incremented": ["ok", "2.0"],
        "label_int": refused + ["Error when creating Metric: " + parent + "attempt to access JSON non-string as "
                                "string"],
        "label_list": refused + ["Failed to create metric. Labels must be a dictionary."],
        "label_set": [False, "TypeError", "Object of type set is not JSON serializable"],
        "label_name": refused + ["Error when creating Metric: " + parent + "Invalid label name"],
        "buckets": refused + ["Failed to create metric. Unexpected buckets found."],
        "buckets_tuple": refused + ["Failed to create metric. Buckets must be a list."],
        "orphan_set": refused + ["Failed to set metric value: " + orphaned],
        "orphan_value": refused + ["Failed to get metric value: " + orphaned],
    }
