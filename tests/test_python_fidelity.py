"""The same python models through the python backend's stub and in-process
give the same outputs, errors and response sequences. Needs the stub to run
correctly (numpy<2: `make test`'s environment)."""

from __future__ import annotations

import json

import numpy
import pytest

import tritonserver
from common import MODELS, ROOT, as_numpy, call_with_deadline, make_options, single, wait_for

pytestmark = pytest.mark.python_stub

EXAMPLES = ROOT / "examples" / "models"


@pytest.fixture(scope="module")
def servers(backend_directory, tmp_path_factory):
    """{"stub": server, "in-process": server} over tests/models and the
    examples' own models."""
    examples = tmp_path_factory.mktemp("examples")
    for name in ("countdown", "text_stats"):
        (examples / name).symlink_to(EXAMPLES / name)
    started = {}
    for mode in ("stub", "in-process"):
        server = tritonserver.Server(make_options(
            backend_directory, server_id=f"fidelity-{mode}", python_models=mode, log_error=False,
            model_repository=[str(MODELS), str(examples)]))
        server.start(wait_until_ready=True, timeout=60)
        assert server.python_models == mode
        started[mode] = server
    yield started
    for server in started.values():
        server.stop()


def outcome(server: tritonserver.Server, model: str, inputs: dict, **kwargs) -> list:
    """Each response as (final, error class and message, {output: value}),
    or the exception iteration raised, as a comparable list."""
    for name in (("add_sub", "streaming") if model == "bls" else ()) + (model,):
        if not server.model(name).ready():
            server.load(name)
    seen: list = []
    try:
        for response in server.model(model).infer(inputs=inputs, **kwargs):
            outputs = {}
            for name, tensor in response.outputs.items():
                if tensor.data_type == tritonserver.DataType.BYTES:
                    outputs[name] = tensor.to_bytes_array().tolist()
                else:
                    array = as_numpy(tensor)
                    outputs[name] = (str(array.dtype), array.shape, array.tolist())
            seen.append((response.final, None if response.error is None else str(response.error), outputs))
            del response
    except tritonserver.TritonError as e:
        seen.append(("raised", type(e).__name__, str(e)))
    return seen


CASES = {
    "add_sub": ("add_sub", {"INPUT0": numpy.arange(16, dtype=numpy.float32),
                            "INPUT1": numpy.linspace(-1, 1, 16, dtype=numpy.float32)}),
    "echo_all_types": ("echo_all_types", {
        "IN_BOOL": numpy.array([True, False]), "IN_UINT64": numpy.array([2**64 - 1], numpy.uint64),
        "IN_INT8": numpy.array([-128, 0, 127], numpy.int8), "IN_FP16": numpy.array([0.5, -2], numpy.float16),
        "IN_FP64": numpy.array([1e-300], numpy.float64),
        "IN_STRING": numpy.array([b"a", b"", b"\x00\xff", "\u00e9".encode()], dtype=numpy.object_)}),
    "parameters": ("parameters", {"INPUT0": numpy.zeros(1, numpy.float32)}),
    "raise_error": ("raise_error", {"INPUT0": numpy.zeros(1, numpy.float32)}),
    "streaming": ("streaming", {"COUNT": numpy.array([5], numpy.int32)}),
    "streaming_empty": ("streaming", {"COUNT": numpy.array([0], numpy.int32)}),
    "sleep": ("sleep", {"SECONDS": numpy.array([0.01], numpy.float32)}),
    "bls": ("bls", {"INPUT0": numpy.arange(4, dtype=numpy.float32), "INPUT1": numpy.ones(4, numpy.float32),
                    "STREAM_COUNT": numpy.array([2], numpy.int32)}),
    "auto_complete": ("auto_complete", {"INPUT0": numpy.arange(3, dtype=numpy.float32)}),
    "countdown": ("countdown", {"START": numpy.array([3], numpy.int32)}),
    "text_stats": ("text_stats", {"TEXT": numpy.array(["h\u00e9llo".encode(), b"", b"Zz"], dtype=numpy.object_)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_outcome_through_the_stub_and_in_process(servers, case):
    model, inputs = CASES[case]
    kwargs = {"parameters": {"key": "value", "n": 7, "flag": False}} if model == "parameters" else {}
    stub = outcome(servers["stub"], model, inputs, **kwargs)
    in_process = outcome(servers["in-process"], model, inputs, **kwargs)
    assert in_process == stub


def test_exception_in_execute_names_the_exception_both_ways(servers):
    results = {mode: outcome(server, "execute_raises", {"INPUT0": numpy.zeros(2, numpy.float32)})
               for mode, server in servers.items()}
    for mode, seen in results.items():
        assert seen[-1][0] == "raised" and seen[-1][1] == "InternalError", (mode, seen)
        assert "execute_raises model: bad batch of 1" in seen[-1][2], (mode, seen)


def test_exception_in_initialize_fails_the_load_both_ways(servers):
    for mode, server in servers.items():
        with pytest.raises(tritonserver.TritonError) as failed:
            server.load("init_raises")
        assert "init_raises model: cannot start init_raises_0" in str(failed.value), mode
        del failed


OBSERVER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seen = {"timeout": request.timeout(), "requested": type(request.requested_output_names()).__name__}
            seen["bytes_name"] = pb_utils.Tensor(b"Y", np.ones(1, np.float32)).name()
            seen["types"] = [pb_utils.numpy_to_triton_type(t)
                             for t in (np.float32, np.dtype("int8"), bool, "float32", np.bytes_, np.dtype("S5"))]
            fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
            seen["c_order"] = bool(pb_utils.Tensor("F", fortran).as_numpy().flags.c_contiguous)
            try:
                pb_utils.Tensor("S", np.array(["text"]))
                seen["str_array"] = "taken"
            except pb_utils.TritonModelException as e:
                seen["str_array"] = str(e).split(" (")[0]
            bls = pb_utils.InferenceRequest(
                model_name="add_sub", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.Tensor("INPUT0", np.ones(2, np.float32)),
                        pb_utils.Tensor("INPUT1", np.ones(2, np.float32))]).exec()
            total = pb_utils.get_output_tensor_by_name(bls, "OUTPUT0").as_numpy()
            total += 10  # a BLS output post-processed in place
            seen["bls"] = total.tolist()
            text = np.array([json.dumps(seen, sort_keys=True).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OBSERVED", text)]))
        return responses
'''


def test_what_a_model_observes_of_requests_tensors_and_bls_outputs_is_the_stubs(servers):
    """request.timeout(), requested_output_names() (a set), a tensor named
    by bytes, a Fortran-order array's as_numpy() (C order), a str array
    (refused, the stub's words), a BLS output written in place: the stub's
    observations in-process too."""
    config = {"name": "observer", "backend": "python", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OBSERVED", "data_type": "TYPE_STRING", "dims": [1]}]}
    seen = {}
    for mode, server in servers.items():
        if not server.model("add_sub").ready():
            server.load("add_sub")
        server.load("observer", {"config": json.dumps(config), "file:1/model.py": OBSERVER.encode()})
        response = outcome(server, "observer", {"INPUT0": numpy.zeros(1, numpy.float32)}, timeout=7_000_000,
                           output_names=["OBSERVED"])
        assert response[-1][1] is None, (mode, response)
        seen[mode] = json.loads(response[-1][2]["OBSERVED"][0])
    assert seen["in-process"] == seen["stub"]
    assert seen["stub"] == {"timeout": 7_000_000, "requested": "set", "bytes_name": "Y", "c_order": True,
                            "types": [11, 6, None, None, 13, None],
                            "str_array": "NumPy dtype is not supported.", "bls": [12.0, 12.0]}


def _loaded_or_error(server: tritonserver.Server, name: str, source: str) -> str:
    """'' when the model loads, else the load error's message."""
    config = {"name": name, "backend": "python", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]}
    try:
        server.load(name, {"config": json.dumps(config), "file:1/model.py": source.encode()})
        return ""
    except tritonserver.TritonError as e:
        return str(e)


def test_errors_of_model_code_are_worded_as_the_stubs(servers):
    """What a failing model.py's author reads: an exception's class name
    (TritonModelException's too), "<EMPTY MESSAGE>" for an empty one, a
    SyntaxError without importlib's frames or an auto_complete_config
    prefix, sys.exit() in initialize() as SystemExit."""
    raising = ("import triton_python_backend_utils as pb_utils\n\n\nclass TritonPythonModel:\n"
               "    def execute(self, requests):\n"
               "        if pb_utils.get_input_tensor_by_name(requests[0], 'INPUT0').as_numpy()[0] == 0:\n"
               "            raise pb_utils.TritonModelException('bad input')\n"
               "        raise RuntimeError()\n")
    exiting = "import sys\n\n\nclass TritonPythonModel:\n    def initialize(self, args):\n        sys.exit(4)\n"
    no_execute = "class TritonPythonModel:\n    def initialize(self, args):\n        pass\n"
    seen = {}
    for mode, server in servers.items():
        assert _loaded_or_error(server, "raising", raising) == ""
        texts = []
        for value in (0.0, 1.0):
            texts.append(outcome(server, "raising", {"INPUT0": numpy.full(1, value, numpy.float32)})[-1][2])
        texts.append(_loaded_or_error(server, "broken_syntax", "class TritonPythonModel\n    pass\n"))
        texts.append(_loaded_or_error(server, "exiting", exiting))
        assert _loaded_or_error(server, "no_execute", no_execute) == ""  # it loads: its requests fail
        texts.append(outcome(server, "no_execute", {"INPUT0": numpy.zeros(1, numpy.float32)})[-1][2])
        seen[mode] = [text.split("\n\nAt:")[0].replace("_0_0", "_0").split(" model /")[0] for text in texts]
    assert seen["in-process"] == seen["stub"]
    tme, empty, syntax, exited, no_execute = seen["stub"]
    assert no_execute == "Failed to process the request(s) for model 'no_execute_0', message: Python"
    assert tme.endswith("message: TritonModelException: bad input") and empty.endswith("RuntimeError: <EMPTY MESSAGE>")
    assert "Internal: SyntaxError: expected ':' (model.py, line 1);" in syntax and "Internal: SystemExit: 4" in exited


BLS_CALLER = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = [pb_utils.Tensor("INPUT0", np.ones(2, np.float32)), pb_utils.Tensor("INPUT1", np.ones(2, np.float32))]
        cases = {"unknown_model": ("no_such_model", x, ["OUTPUT0"]),
                 "unknown_output": ("add_sub", x, ["NOPE"]),
                 "wrong_type": ("add_sub", [pb_utils.Tensor("INPUT0", np.ones(2, np.int32)), x[1]], ["OUTPUT0"]),
                 "decoupled_without_flag": ("streaming", [pb_utils.Tensor("COUNT", np.array([2], np.int32))], [])}
        seen = []
        for case, (model, inputs, outputs) in sorted(cases.items()):
            response = pb_utils.InferenceRequest(model_name=model, inputs=inputs,
                                                 requested_output_names=outputs).exec()
            error = response.error()
            seen.append(f"{case}: {int(getattr(error.code(), 'value', error.code()))} {error.message()}")
        text = np.array([s.encode() for s in seen], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", text)]) for _ in requests]
'''


def test_bls_requests_the_core_refuses_are_answered_as_the_stubs(servers):
    """A BLS request to an unknown model, naming an unknown output, with an
    input of the wrong type, or without decoupled=True to a decoupled
    model: the stub's error response (code INTERNAL, "Model <name> - Error
    when running inference: ..."), not the in-process API's host advice.
    (The stub's core texts keep a "[request id: <id_unknown>] " prefix
    that this package leaves out of every core message.)"""
    config = {"name": "bls_refused", "backend": "python", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_STRING", "dims": [-1]}]}
    seen = {}
    for mode, server in servers.items():
        for name in ("add_sub", "streaming"):
            if not server.model(name).ready():
                server.load(name)
        server.load("bls_refused", {"config": json.dumps(config), "file:1/model.py": BLS_CALLER.encode()})
        result = outcome(server, "bls_refused", {"INPUT0": numpy.zeros(1, numpy.float32)})
        assert result[-1][1] is None, (mode, result)
        seen[mode] = [line.decode().replace("[request id: <id_unknown>] ", "") for line in result[-1][2]["OUTPUT0"]]
    assert seen["in-process"] == seen["stub"]
    assert seen["stub"][1] == ("unknown_model: 1 Model no_such_model - Error when running inference: Failed for "
                               "execute the inference request. Model 'no_such_model' is not ready.")


ANSWERS_LATER = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.waiting = None  # the sender of a request answered by the next one

    def execute(self, requests):
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if self.waiting is not None:
                sender, kept = self.waiting
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", kept + 100)]),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                self.waiting = None
                request.get_response_sender().send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value)]),
                                                   flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                self.waiting = (request.get_response_sender(), value)
        return None
'''


def test_a_non_decoupled_model_answers_after_execute_returned_as_with_the_stub(servers):
    """A non-decoupled model returns None and answers the request later,
    through its sender (here: when the next request comes): the client gets
    that response, as with the stub (it failed when execute() returned)."""
    config = {"name": "answers_later", "backend": "python", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]}
    seen = {}
    for mode, server in servers.items():
        server.load("answers_later", {"config": json.dumps(config), "file:1/model.py": ANSWERS_LATER.encode()})
        model = server.model("answers_later")
        first = model.infer(inputs={"INPUT0": numpy.array([1.0], numpy.float32)}, raise_on_error=False)
        second = model.infer(inputs={"INPUT0": numpy.array([2.0], numpy.float32)}, raise_on_error=False)
        seen[mode] = [[(r.final, None if r.error is None else str(r.error),
                        as_numpy(r.outputs["OUTPUT0"]).tolist() if "OUTPUT0" in r.outputs else None)
                       for r in call_with_deadline(lambda: list(responses), 30)] for responses in (first, second)]
    assert seen["in-process"] == seen["stub"]
    assert seen["stub"] == [[(True, None, [101.0])], [(True, None, [2.0])]]


BATCHING = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0",
                pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
'''


def test_batch_statistics_count_the_batch_size_as_the_stubs(servers):
    """A batching model's batch statistics: the batch size of each
    execution (requests of batch 2 and 3 count 2 and 3), the stub's; a
    model without batching counts its requests (it counted requests)."""
    seen = {}
    for mode, server in servers.items():
        for name, max_batch_size in (("batching", 8), ("not_batching", 0)):
            dims = [-1] if max_batch_size else [-1, -1]  # requests of shape [rows, 4]
            config = {"name": name, "backend": "python", "max_batch_size": max_batch_size,
                      "dynamic_batching": {},
                      "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": dims}],
                      "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": dims}]}
            server.load(name, {"config": json.dumps(config), "file:1/model.py": BATCHING.encode()})
            for rows in (2, 3):  # one at a time: one execution each
                outcome(server, name, {"INPUT0": numpy.ones((rows, 4), numpy.float32)})

            def statistics():
                stats = server.model(name).statistics()
                return stats["model_stats"][0] if "model_stats" in stats else stats

            # The stub reports an execution's statistics after its responses.
            assert wait_for(lambda: statistics()["execution_count"] == 2, 30), statistics()
            stats = statistics()
            seen[(mode, name)] = (stats["inference_count"], stats["execution_count"],
                                  sorted((b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]))
    for name in ("batching", "not_batching"):
        assert seen[("in-process", name)] == seen[("stub", name)], name
    assert seen[("stub", "batching")] == (5, 2, [(2, 1), (3, 1)])
    assert seen[("stub", "not_batching")] == (2, 2, [(1, 2)])


BF16_MODEL = '''
import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            given = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            try:
                given.as_numpy()
                said = "as_numpy() gave an array"
            except pb_utils.TritonModelException as e:
                said = str(e)
            doubled = torch.utils.dlpack.from_dlpack(given.to_dlpack()) * 2
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", torch.utils.dlpack.to_dlpack(doubled))
            echo = pb_utils.InferenceRequest(  # BLS: BF16 both ways
                model_name="identity_bf16", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.Tensor.from_dlpack("INPUT0", torch.utils.dlpack.to_dlpack(doubled.flatten()))]).exec()
            echoed = torch.utils.dlpack.from_dlpack(pb_utils.get_output_tensor_by_name(echo, "OUTPUT0").to_dlpack())
            facts = [said, str(doubled.dtype), str(out.shape()), str(echoed.dtype), str(echoed.tolist())]
            responses.append(pb_utils.InferenceResponse(
                [out, pb_utils.Tensor("FACTS", np.array([f.encode() for f in facts], dtype=np.object_))]))
        return responses
'''


def test_a_bf16_model_loads_and_runs_through_dlpack_as_with_the_stub(servers):
    """A model with BF16 inputs and outputs (it failed to load in-process,
    KeyError: 'TYPE_BF16'): its input reaches torch through to_dlpack()
    as bfloat16, as_numpy() refuses it in the stub's words, and a
    bfloat16 tensor from from_dlpack() goes back as BF16, and through BLS
    both ways."""
    pytest.importorskip("torch")
    from tritonserver._api._memorybuffer import MemoryBuffer

    config = {"name": "bf16_torch", "backend": "python", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_BF16", "dims": [-1, -1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_BF16", "dims": [-1, -1]},
                         {"name": "FACTS", "data_type": "TYPE_STRING", "dims": [-1]}]}
    floats = numpy.array([[1.0, -2.5], [3.140625, 0.0]], numpy.float32)
    bits = (floats.view(numpy.uint32) >> 16).astype(numpy.uint16)  # exact in bfloat16
    seen = {}
    for mode, server in servers.items():
        if not server.model("identity_bf16").ready():
            server.load("identity_bf16")
        server.load("bf16_torch", {"config": json.dumps(config), "file:1/model.py": BF16_MODEL.encode()})
        given = tritonserver.Tensor(tritonserver.DataType.BF16, [2, 2], MemoryBuffer.from_dlpack(bits))
        response = single(server.model("bf16_torch").infer(inputs={"INPUT0": given}))
        out = response.outputs["OUTPUT0"]
        words = numpy.from_dlpack(tritonserver.Tensor(tritonserver.DataType.UINT16, out.shape, out.memory_buffer))
        seen[mode] = (out.data_type.name, (words.astype(numpy.uint32) << 16).view(numpy.float32).tolist(),
                      [f.decode() for f in response.outputs["FACTS"].to_bytes_array()])
        del response, out
    assert seen["in-process"] == seen["stub"]
    assert seen["stub"] == ("BF16", (floats * 2).tolist(),
                            ["Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                             "from_dlpack() instead.", "torch.bfloat16", "[2, 2]", "torch.bfloat16",
                             str((floats * 2).flatten().tolist())])


BLS_ITERATES = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


def count(n):
    return pb_utils.InferenceRequest(model_name="streaming", inputs=[pb_utils.Tensor("COUNT", np.array([n], np.int32))],
                                     requested_output_names=["OUT"])


def values(responses):
    return [pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy().tolist() if r.output_tensors() else "final"
            for r in responses]


class TritonPythonModel:
    def execute(self, requests):
        seen = {}
        responses = count(3).exec(decoupled=True)
        seen["first"] = values(responses)
        seen["again"] = values(responses)  # the stub replays them
        responses = count(2).exec(decoupled=True)
        seen["one"] = values([next(responses)])
        seen["rest"] = values(responses)  # resumes, then replays from the first
        seen["after"] = values(responses)
        for name, kwargs in (("no_model_name", {"inputs": [], "requested_output_names": []}),
                             ("no_inputs", {"model_name": "streaming", "requested_output_names": []}),
                             ("no_requested_output_names", {"model_name": "streaming", "inputs": []}),
                             ("model_name_none", {"model_name": None, "inputs": [], "requested_output_names": []})):
            try:
                pb_utils.InferenceRequest(**kwargs)
                seen[name] = "accepted"
            except Exception as e:
                seen[name] = type(e).__name__
        text = np.array([json.dumps(seen, sort_keys=True).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", text)]) for _ in requests]
'''


def test_decoupled_bls_iterator_and_request_arguments_are_the_stubs(servers):
    """The iterator of exec(decoupled=True) gives its responses again in a
    new loop once they all came (it gave nothing in-process), and resumes
    where a loop left it; InferenceRequest() without model_name, inputs or
    requested_output_names (or with None) raises TypeError, as the stub's
    signature does (in-process took them)."""
    config = {"name": "bls_iterates", "backend": "python", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_STRING", "dims": [-1]}]}
    seen = {}
    for mode, server in servers.items():
        if not server.model("streaming").ready():
            server.load("streaming")
        server.load("bls_iterates", {"config": json.dumps(config), "file:1/model.py": BLS_ITERATES.encode()})
        result = outcome(server, "bls_iterates", {"INPUT0": numpy.zeros(1, numpy.float32)})
        assert result[-1][1] is None, (mode, result)
        seen[mode] = json.loads(result[-1][2]["OUTPUT0"][0])
    assert seen["in-process"] == seen["stub"]
    stub = seen["stub"]
    assert stub["again"] == stub["first"] and stub["first"][:3] == [[0], [1], [2]], stub
    assert stub["one"] + stub["rest"] == stub["after"], stub
    assert [stub[k] for k in ("no_model_name", "no_inputs", "no_requested_output_names", "model_name_none")] == [
        "TypeError"] * 4
