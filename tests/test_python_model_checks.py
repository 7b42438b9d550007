"""What an in-process python model (or a bound function) hands the package
that it cannot send as given is an error naming the model, the cause and a
fix, never a changed value: Tensor data types, response parameters, bound
outputs given as lists, signal handlers, ragged batches, and a response
both sent through the sender and returned. Runs under numpy<2 and numpy 2
alike (no stub)."""

from __future__ import annotations

import re

import numpy
import pytest

import tritonserver
from tritonserver import TensorSpec

from common import as_numpy, call_with_deadline, dedicated_server, python_model_repository, refused, single, wait_for

_FP32_INPUTS = {"INPUT0": numpy.zeros(2, numpy.float32), "INPUT1": numpy.zeros(2, numpy.float32)}


def _inputs(case: int) -> dict[str, numpy.ndarray]:
    """add_sub-shaped inputs whose INPUT0[0] picks the model's case."""
    a = numpy.full(2, case, numpy.float32)
    return {"INPUT0": a, "INPUT1": a}


def _serve(backend_directory: str, tmp_path, name: str, source: str, decoupled: bool = False):
    """A server of its own with the python model `name` (add_sub-shaped,
    running `source`) loaded in-process."""
    repo = python_model_repository(tmp_path, name, source, decoupled)
    return dedicated_server(backend_directory, f"checks-{name}", [name], python_models="in-process",
                            model_repository=str(repo))


# -- 6: Tensor(name, array, dtype) ----------------------------------------------------------------

_TYPED = (
    "import numpy as np\n"
    "import triton_python_backend_utils as pb_utils\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        out = []\n"
    "        for r in requests:\n"
    "            case = int(pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()[0])\n"
    "            ints = np.array([1, 2], np.int32)\n"
    "            if case == 1:\n"
    "                first = pb_utils.Tensor('OUTPUT0', ints, pb_utils.numpy_to_triton_type(np.float32))\n"
    "            elif case == 2:\n"
    "                first = pb_utils.Tensor('OUTPUT0', ints, dtype=pb_utils.numpy_to_triton_type(np.float64))\n"
    "            elif case == 3:\n"
    "                first = pb_utils.Tensor('OUTPUT0', np.array([object()] * 2, dtype=object),\n"
    "                                        pb_utils.numpy_to_triton_type(np.float32))\n"
    "            else:\n"
    "                first = pb_utils.Tensor('OUTPUT0', ints.astype(np.float32))\n"
    "            out.append(pb_utils.InferenceResponse([first, pb_utils.Tensor('OUTPUT1', np.zeros(2, np.float32))]))\n"
    "        return out\n")


def test_a_tensor_takes_its_arrays_data_type_and_refuses_another(backend_directory, tmp_path):
    """Tensor(name, array, dtype), which the stub refuses, is refused here
    too, by position or keyword: int32 values sent as FP32 arrived as
    [1e-45, 3e-45], as FP64 over an 8-byte buffer, and an object array as
    FP32 had no bytes to send. The model keeps serving."""
    with _serve(backend_directory, tmp_path, "typed", _TYPED) as server:
        model = server.model("typed")
        for case in (1, 2, 3):
            with refused(tritonserver.InternalError,
                         match=r"Failed to process the request\(s\) for model 'typed_0_0', message: TypeError: "
                               r"Tensor 'OUTPUT0': Tensor\(name, array\) takes no data type .* convert the array "
                               r"instead, e.g. array.astype\("):
                single(model.infer(inputs=_inputs(case)))
        outputs = single(model.infer(inputs=_inputs(0))).outputs
        assert outputs["OUTPUT0"].data_type == tritonserver.DataType.FP32
        assert as_numpy(outputs["OUTPUT0"]).tolist() == [1.0, 2.0]


# -- 10c: Tensor.from_dlpack of a read-only NumPy array -------------------------------------------

_FROM_DLPACK = (
    "import numpy as np\n"
    "import triton_python_backend_utils as pb_utils\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        out = []\n"
    "        for r in requests:\n"
    "            fixed = np.arange(3, dtype=np.float32)\n"
    "            fixed.setflags(write=False)\n"
    "            writable = np.arange(3, dtype=np.int64) * 2\n"
    "            out.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack('OUTPUT0', fixed),\n"
    "                                                   pb_utils.Tensor.from_dlpack('OUTPUT1', writable)]))\n"
    "        return out\n")


def test_from_dlpack_takes_read_only_numpy_arrays(backend_directory, tmp_path):
    """numpy<2's __dlpack__ refuses a read-only array (BufferError); a
    NumPy array is taken as it is, read-only or not, with its dtype."""
    with _serve(backend_directory, tmp_path, "from_dlpack", _FROM_DLPACK) as server:
        outputs = single(server.model("from_dlpack").infer(inputs=_FP32_INPUTS)).outputs
        assert outputs["OUTPUT0"].data_type == tritonserver.DataType.FP32
        assert as_numpy(outputs["OUTPUT0"]).tolist() == [0.0, 1.0, 2.0]
        assert outputs["OUTPUT1"].data_type == tritonserver.DataType.INT64
        assert as_numpy(outputs["OUTPUT1"]).tolist() == [0, 2, 4]


# -- 10a: response parameters ---------------------------------------------------------------------

_PARAMETER_CASES = {
    1: ("{'a\\x00b': 'x'}", r"response parameter 'a\\x00b': its name holds a NUL character"),
    2: ("{'a': 'x\\x00y'}", r"response parameter 'a': its value holds a NUL character"),
    3: ("{'big': 2**63}", r"response parameter 'big': 9223372036854775808 is outside the range of a Triton int "
                          r"parameter \(int64"),
    4: ("{'small': -2**63 - 1}", r"response parameter 'small': -9223372036854775809 is outside the range"),
    5: ("{1: 'x'}", r"Expect parameters keys to have type str, found type <class 'int'>"),
    6: ("{'f': 1.5}", r"Expect parameters values to have type bool/int/str, found type <class 'float'>"),
    7: ("[('a', 'b')]", r"Expect parameters to have type dict, found type <class 'list'>"),
}
_PARAMETERS = (
    "import numpy as np\n"
    "import triton_python_backend_utils as pb_utils\n"
    f"CASES = {{{', '.join(f'{k}: {v[0]}' for k, v in _PARAMETER_CASES.items())}}}\n"
    "CASES[0] = {'max': 2**63 - 1, 'min': -2**63, 'flag': True, 'text': 'ok'}\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        out = []\n"
    "        for r in requests:\n"
    "            case = int(pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()[0])\n"
    "            tensors = [pb_utils.Tensor('OUTPUT0', np.zeros(1, np.float32)),\n"
    "                       pb_utils.Tensor('OUTPUT1', np.zeros(1, np.float32))]\n"
    "            out.append(pb_utils.InferenceResponse(tensors, parameters=CASES[case]))\n"
    "        return out\n")


def test_response_parameters_are_checked_before_anything_is_sent(backend_directory, tmp_path):
    """A NUL in a parameter's name or value was cut off there ('a\\x00b':
    'x\\x00y' arrived as {'a': 'x'}), an int outside int64 failed with
    "std::bad_cast"; each is refused where the response is made, as are
    keys that are not str and values that are not bool/int/str (in the
    newer python backend's words). int64's own bounds arrive as sent."""
    with _serve(backend_directory, tmp_path, "parameters_checked", _PARAMETERS) as server:
        model = server.model("parameters_checked")
        for case, (_, message) in _PARAMETER_CASES.items():
            with refused(tritonserver.InternalError,
                         match=r"Failed to process the request\(s\) for model 'parameters_checked_0_0', message: "
                               r"(TritonModelException|TypeError): " + message):
                single(model.infer(inputs=_inputs(case)))
        response = single(model.infer(inputs=_inputs(0)))
        assert response.parameters == {"max": 2**63 - 1, "min": -2**63, "flag": True, "text": "ok"}


# -- 10b: signal handlers --------------------------------------------------------------------------

_HINT = (r"This python model runs in-process, on the Triton core's threads .* only the main thread may install "
         r"signal handlers: install the handler in the host program, or run the model with the stub: "
         r"Options\(python_models=\"stub\"\)")


@pytest.mark.parametrize("where, source, stage", [
    ("initialize",
     "import signal\n"
     "class TritonPythonModel:\n"
     "    def initialize(self, args):\n"
     "        signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
     "    def execute(self, requests):\n"
     "        return []\n",
     ""),
    ("top_level",
     "import signal\n"
     "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
     "class TritonPythonModel:\n"
     "    def execute(self, requests):\n"
     "        return []\n",
     # (model.py's import: its error alone, as the stub's)
     ""),
], ids=["initialize", "top_level"])
def test_a_signal_handler_fails_the_load_saying_why(backend_directory, tmp_path, where, source, stage):
    """signal.signal() works on the stub's main thread, not on the core's
    threads that run in-process models: the load error names the model and
    says why and what to do, after Python's own words."""
    name = f"signals_{where}"
    repo = python_model_repository(tmp_path, name, source)
    with dedicated_server(backend_directory, f"checks-{name}", [], python_models="in-process",
                          model_repository=str(repo)) as server:
        with refused(tritonserver.InvalidArgumentError,
                     match=f"load failed for model '{name}'.*Internal: {stage}ValueError: signal only works in main "
                           f"thread of the main interpreter\n\n{_HINT}\n\nAt:\n"):
            server.load(name)
        assert not server.model(name).ready()


# -- 10e: a response sent through the sender and returned as well -------------------------------

_SENT_AND_RETURNED = (
    "import numpy as np\n"
    "import triton_python_backend_utils as pb_utils\n"
    "def response(value):\n"
    "    return pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT0', np.full(1, value, np.float32)),\n"
    "                                       pb_utils.Tensor('OUTPUT1', np.full(1, value, np.float32))])\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        returned, kept = [], []\n"
    "        for r in requests:\n"
    "            case = int(pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()[0])\n"
    "            if case == 0:  # the sender dropped at once\n"
    "                r.get_response_sender().send(response(1.0))\n"
    "                returned.append(response(2.0))\n"
    "            elif case == 1:  # the sender kept until execute() returns\n"
    "                kept.append(r.get_response_sender())\n"
    "                kept[-1].send(response(1.0))\n"
    "                returned.append(response(2.0))\n"
    "            elif case == 2:  # the one response, final, through the sender\n"
    "                r.get_response_sender().send(response(3.0), pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n"
    "                returned.append(None)\n"
    "            else:  # final through the sender, and returned too\n"
    "                r.get_response_sender().send(response(4.0), pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n"
    "                returned.append(response(5.0))\n"
    "        return returned\n")
_TWICE = (r"Failed to process the request\(s\) for model 'sent_and_returned_0_0', message: Unable to send "
          r"response. Non-decoupled model cannot send more than one response. \(model 'sent_and_returned': "
          r"execute\(\) returned a response for request\(s\) \[0\] of the batch, which had one sent through the "
          r"response sender; .* put None in the returned list for a request answered through its sender\)")


def test_a_response_sent_through_the_sender_and_returned_is_the_stubs_error(backend_directory, tmp_path, caplog):
    """A non-decoupled model that sent a response through the request's
    sender and returned one for it too: the 2.51 stub's error (its
    UpdateStateAndCounters) follows the response sent, as with the stub,
    whether the model kept the sender or not; the returned one was lost
    (the dropped sender's error went out first) or sent as a second
    response. A request answered only through its sender is answered; one
    whose sender sent the final response gets no more, and the error is
    logged, as the stub logs it."""
    with _serve(backend_directory, tmp_path, "sent_and_returned", _SENT_AND_RETURNED) as server:
        model = server.model("sent_and_returned")

        def responses(case: int) -> list[tritonserver.InferenceResponse]:
            return call_with_deadline(lambda: list(model.infer(inputs=_inputs(case), raise_on_error=False)), 30)

        for case in (0, 1):
            first, last = responses(case)
            assert not first.final and first.error is None and as_numpy(first.outputs["OUTPUT0"]).tolist() == [1]
            assert last.final and not last.outputs
            assert isinstance(last.error, tritonserver.InternalError) and re.search(_TWICE, str(last.error))
        [answered] = responses(2)
        assert answered.final and answered.error is None and as_numpy(answered.outputs["OUTPUT0"]).tolist() == [3]
        caplog.clear()
        def logged() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.name == "tritonserver.models"]

        with caplog.at_level("ERROR", logger="tritonserver.models"):
            [answered] = responses(3)
            # The response went out through the sender before execute()
            # returned; the error about the returned one is logged after.
            wait_for(lambda: logged(), 30)
        assert answered.final and answered.error is None and as_numpy(answered.outputs["OUTPUT0"]).tolist() == [4]
        assert len(logged()) == 1 and re.search(_TWICE, logged()[0]), logged()


# -- 7, 10d: Server.bind ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bind_server(backend_directory, tmp_path_factory):
    """A server for bound functions (in-process, as every bound model)."""
    repository = tmp_path_factory.mktemp("checks_bind_repository")
    with dedicated_server(backend_directory, "checks-bind", [], python_models="in-process",
                          model_repository=str(repository)) as server:
        yield server


_REFUSED_LISTS = [
    ("int32", [1.9, -5.7], r"a list holding floats \(float64\), which int32 cannot hold exactly"),
    ("int32", [1e10], r"a list holding floats \(float64\), which int32 cannot hold exactly"),
    ("int32", [10**10], r"a list holding integers \(int64\) outside the range of int32, which int32 cannot"),
    ("uint8", [300, -1, 256], r"a list holding integers \(int64\) outside the range of uint8"),
    ("uint64", [-1], r"a list holding integers \(int64\) outside the range of uint64"),
    ("int64", [2**63], r"a list holding integers \(uint64\) outside the range of int64"),
    ("float32", [1e300], r"a list holding floats \(float64\) outside the range of float32"),
    ("bool", [0, 1], r"a list holding integers \(int64\), which bool cannot hold exactly"),
    ("float32", [1 + 2j], r"a list holding complex numbers \(complex128\), which float32 cannot"),
    ("int32", ["7"], r"a list holding str \(<U1\), which int32 cannot"),
]
_TAKEN_LISTS = [
    ("int32", [1, -5, 2**31 - 1], [1, -5, 2**31 - 1]),
    ("uint8", [0, 255, True], [0, 255, 1]),
    ("float32", [0.5, -2, 1e38], [0.5, -2.0, numpy.float32(1e38).item()]),
    ("float16", [float("inf"), 1], [float("inf"), 1.0]),
    ("bool", [True, False], [True, False]),
    ("int64", [], []),
]


def test_bound_outputs_given_as_lists_are_checked_as_arrays_are(bind_server):
    """A list was converted by truncation and wrap-around ([1.9, -5.7] ->
    [1, -5]; on numpy 1 [300, -1, 256] -> uint8 [44, 255, 0], 1e10 ->
    int32 1410065408) where the same values as an ndarray are refused: a
    list (or scalar) is taken when its values convert to the declared type
    exactly, and refused naming the model, the output, the declared type
    and the values' kind otherwise."""
    given: dict[str, object] = {}

    def values(X):
        return {"Y": given["value"]}

    for dtype in sorted({d for d, *_ in _REFUSED_LISTS + _TAKEN_LISTS}):
        name = f"lists_{dtype}"
        model = bind_server.bind(name, values, inputs=[TensorSpec("X", numpy.float32, (1,))],
                                 outputs=[TensorSpec("Y", dtype, (-1,))])
        for declared, value, message in _REFUSED_LISTS:
            if declared != dtype:
                continue
            given["value"] = value
            with refused(tritonserver.InternalError,
                         match=f"model '{name}': output 'Y' is declared {dtype} but the callable returned {message}"):
                single(model.infer(inputs={"X": numpy.zeros(1, numpy.float32)}))
            # The same values as an ndarray of their own dtype: refused too.
            given["value"] = numpy.asarray(value)
            with refused(tritonserver.InternalError, match=f"output 'Y' is declared {dtype} but the callable"):
                single(model.infer(inputs={"X": numpy.zeros(1, numpy.float32)}))
        for declared, value, expected in _TAKEN_LISTS:
            if declared != dtype:
                continue
            given["value"] = value
            output = single(model.infer(inputs={"X": numpy.zeros(1, numpy.float32)})).outputs["Y"]
            got = as_numpy(output)
            assert got.dtype == numpy.dtype(dtype) and got.tolist() == expected, (dtype, value, got)


def test_bind_refuses_allow_ragged_batch(bind_server):
    """Every mixed-shape batch of a binding with allow_ragged_batch failed
    in numpy.concatenate: it is refused at bind, before anything loads."""
    config = {"input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1], "allow_ragged_batch": True}]}
    with pytest.raises(ValueError, match=r"bind\('ragged'\): input\(s\) \['X'\] have allow_ragged_batch, which a "
                                         r"bound callable cannot take: .* leave allow_ragged_batch out"):
        bind_server.bind("ragged", lambda X: {"Y": X}, inputs=[TensorSpec("X", numpy.float32, (-1,))],
                         outputs=[TensorSpec("Y", numpy.float32, (-1,))], max_batch_size=8, config=config)
    assert ("ragged", 1) not in bind_server.models()


# -- an output returned as another type than the config declares --------------------------------

def test_an_output_of_another_type_than_declared_is_said_once_naming_both(backend_directory, tmp_path, caplog):
    """OUTPUT0 (declared TYPE_FP32) returned as FP64: sent as it is, as the
    stub sends it, and said once (a warning naming the model, the output and
    both types), however many responses carry it."""
    source = (
        "import numpy as np\n"
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        out = []\n"
        "        for r in requests:\n"
        "            x = pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy()\n"
        "            out.append(pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT0', x.astype(np.float64)),\n"
        "                                                   pb_utils.Tensor('OUTPUT1', x)]))\n"
        "        return out\n")
    caplog.set_level("WARNING", logger="tritonserver.models")
    with _serve(backend_directory, tmp_path, "widened", source) as server:
        model = server.model("widened")
        for _ in range(3):
            response = call_with_deadline(lambda: single(model.infer(inputs=_FP32_INPUTS)), 60)
            assert response.outputs["OUTPUT0"].data_type == tritonserver.DataType.FP64
            assert response.outputs["OUTPUT1"].data_type == tritonserver.DataType.FP32
    said = [r.getMessage() for r in caplog.records if "declared" in r.getMessage()]
    assert len(said) == 1, said
    assert re.search(r"model 'widened': output 'OUTPUT0' is declared TYPE_FP32 in its config, but execute\(\) "
                     r"returned FP64", said[0]), said[0]
