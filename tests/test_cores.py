"""The loaded core, whichever it is: the version it reports, identity and
python-backend inference, and each optional C function (docs/cores.md): on a
core that lacks it, using its feature raises UnsupportedError naming the
feature, the function and the core; on a core that has it, the feature works.

`make test-cores` (tests/run_cores.sh) runs this file, with the identity and
python-backend suites, against each core on PyPI (TRITONSERVER_LIBRARY points
at it; TRITON_CORE_VERSION says which Triton version it must report). Under
`make test` it checks the default core, Triton 2.51.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import threading

import numpy
import pytest

import tritonserver
from tritonserver import _native
from tritonserver._api import _triton_core
from common import as_numpy, make_options, single

EXPECTED_VERSION = os.environ.get("TRITON_CORE_VERSION", "2.51.0")

# Each optional function and the feature that needs it (cpp/triton_api.h).
OPTIONAL = {
    "TRITONSERVER_InferenceRequestSetDoubleParameter": "float request parameters",
    "TRITONSERVER_ServerOptionsSetModelLoadRetryCount": "Options.model_load_retry_count",
    "TRITONSERVER_ServerOptionsSetEnablePeerAccess": "Options.enable_peer_access",
    "TRITONSERVER_ServerOptionsSetLogCallback": "Options.log_callback",
}


def core_exports(function: str) -> bool:
    """Whether the loaded core's library exports `function` (read with
    ctypes, independently of the package's own table)."""
    library = ctypes.CDLL(_triton_core.load_core().library, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    return hasattr(library, function)


def assert_unsupported(excinfo: pytest.ExceptionInfo[tritonserver.UnsupportedError], function: str) -> None:
    """The message names the feature, the C function and the core."""
    message = str(excinfo.value)
    major, minor = _native.loaded_api_version()
    assert OPTIONAL[function] in message
    assert function in message
    assert f"C API {major}.{minor}" in message
    assert _triton_core.load_core().library in message


def start(backend_directory: str, **overrides: object) -> tritonserver.Server:
    options = make_options(backend_directory, server_id="cores", log_error=False, **overrides)
    return tritonserver.Server(options).start(wait_until_ready=True, timeout=60)


# -- what every supported core does ---------------------------------------------------

def test_metadata_reports_the_expected_version(server):
    assert server.metadata()["version"] == EXPECTED_VERSION
    major, minor = _native.loaded_api_version()
    assert (major, minor) >= (1, 25)


def test_missing_functions_are_those_the_core_does_not_export():
    missing = dict(_native.missing_functions())
    assert set(missing) <= set(OPTIONAL)
    assert set(missing) == {f for f in OPTIONAL if not core_exports(f)}
    for function, feature in missing.items():
        assert OPTIONAL[function] in feature


def test_identity_inference_is_exact(model):
    data = numpy.arange(-8, 8, dtype=numpy.float32) / 3
    response = single(model("identity_fp32").infer(inputs={"INPUT0": data}))
    assert as_numpy(response.outputs["OUTPUT0"]).tobytes() == data.tobytes()


def test_python_backend_inference(model):
    problem = _triton_core.python_stub_problem(_triton_core.load_core())
    if problem is not None:
        pytest.skip(problem)
    a = numpy.arange(8, dtype=numpy.float32)
    response = single(model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": a * 2}))
    assert as_numpy(response.outputs["OUTPUT0"]).tolist() == (a * 3).tolist()
    assert as_numpy(response.outputs["OUTPUT1"]).tolist() == (-a).tolist()


# -- one test per optional function --------------------------------------------------

def test_float_request_parameter(model):
    function = "TRITONSERVER_InferenceRequestSetDoubleParameter"
    problem = _triton_core.python_stub_problem(_triton_core.load_core())
    if problem is not None:
        pytest.skip(problem)
    parameters = model("parameters")
    inputs = {"INPUT0": numpy.zeros(1, numpy.float32)}
    if core_exports(function):
        response = single(parameters.infer(inputs=inputs, parameters={"ratio": 0.25, "n": 3}))
        [raw] = response.outputs["PARAMETERS"].to_bytes_array().tolist()
        assert json.loads(raw.decode()) == {"ratio": 0.25, "n": 3}
        return
    with pytest.raises(tritonserver.UnsupportedError) as excinfo:
        parameters.infer(inputs=inputs, parameters={"ratio": 0.25, "n": 3})
    assert_unsupported(excinfo, function)
    # The other parameter types still work on this core.
    response = single(parameters.infer(inputs=inputs, parameters={"n": 3, "s": "x", "b": True}))
    [raw] = response.outputs["PARAMETERS"].to_bytes_array().tolist()
    assert json.loads(raw.decode()) == {"n": 3, "s": "x", "b": True}


@pytest.mark.parametrize(
    ("function", "option", "value", "default"),
    [("TRITONSERVER_ServerOptionsSetModelLoadRetryCount", "model_load_retry_count", 2, 0),
     ("TRITONSERVER_ServerOptionsSetEnablePeerAccess", "enable_peer_access", False, True)],
    ids=["model_load_retry_count", "enable_peer_access"])
def test_server_option(backend_directory, function, option, value, default):
    # The default is what a core without the setter does anyway: it starts.
    server = start(backend_directory, **{option: default})
    assert server.ready()
    server.stop()
    if core_exports(function):
        server = start(backend_directory, **{option: value})
        assert server.ready()
        server.stop()
        return
    server = tritonserver.Server(make_options(backend_directory, server_id="cores", **{option: value}))
    with pytest.raises(tritonserver.UnsupportedError) as excinfo:
        server.start()
    assert_unsupported(excinfo, function)
    assert f"Options.{option}" in str(excinfo.value)
    assert server._server is None  # nothing started


def test_log_callback(backend_directory):
    function = "TRITONSERVER_ServerOptionsSetLogCallback"
    lines: list[str] = []
    seen = threading.Event()

    def on_log(level: object, filename: str, line: int, message: str) -> None:
        lines.append(message)
        seen.set()

    if core_exports(function):
        server = start(backend_directory, log_info=True, log_callback=on_log)
        try:
            assert seen.wait(30)
            assert any(re.search(r"\S", line) for line in lines)
        finally:
            server.stop()
        return
    server = tritonserver.Server(make_options(backend_directory, server_id="cores", log_callback=on_log))
    with pytest.raises(tritonserver.UnsupportedError) as excinfo:
        server.start()
    assert_unsupported(excinfo, function)
    assert server._server is None
