"""The python backend's stub and numpy. The stub of the Triton 2.51 core
(nvidia-pytriton 0.7.0) needs numpy<2 in its environment; with numpy 2 its
models returned wrong numbers with no error (add_sub of arange(8)+arange(8)
gave -6.7e20, ...) and BYTES models crashed the stub. Where its environment
has numpy 2, Options.python_models="auto" runs python models in-process
instead; with python_models="stub" the package refuses them at load/start
with UnsupportedError; a numpy<2 environment named by
TRITONSERVER_PYTHON_BACKEND_ENV makes the stub work.

These tests run in both environments (make test: numpy<2; make
test-numpy2: numpy 2) and check the branch that applies: they are not
marked `python_stub` (the marker skips a test under numpy 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy
import pytest

import tritonserver
from tritonserver._api import _triton_core
from common import MODELS, NUMPY2, ROOT, as_numpy, call_with_deadline, make_options, single

PYTHON_MODEL = "add_sub"
BYTES_MODEL = "echo_all_types"
NUMPY1_ENV = ROOT / ".venv"  # make build's environment: numpy<2, this Python


@pytest.fixture
def stub_env(monkeypatch):
    """The stub's environment as a test sets it; PATH and the variable are
    restored afterwards (prepare_stub_environment edits PATH)."""
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))
    monkeypatch.delenv(_triton_core.STUB_ENVIRONMENT_VARIABLE, raising=False)
    return monkeypatch


def check_add_sub(server: tritonserver.Server) -> None:
    a = numpy.arange(8, dtype=numpy.float32)
    response = single(server.model(PYTHON_MODEL).infer(inputs={"INPUT0": a, "INPUT1": a}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), a + a)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), a - a)


def assert_numpy_refusal(error: tritonserver.UnsupportedError, model: str) -> None:
    message = str(error)
    assert model in message
    assert f"numpy {numpy.__version__}" in message  # the version seen in the stub's environment
    assert "numpy<2" in message  # the core's requirement
    assert 'python_models="in-process"' in message  # a fix that works everywhere
    if sys.version_info >= (3, 13):  # no numpy<2 exists there: never suggested
        assert "pip install 'numpy<2'" not in message
    else:
        assert _triton_core.STUB_ENVIRONMENT_VARIABLE in message  # the stub's own fix


def start(backend_directory: str, server_id: str, **options) -> tritonserver.Server:
    server = tritonserver.Server(make_options(backend_directory, server_id=server_id, log_error=False, **options))
    return server.start(wait_until_ready=True, timeout=60)


def stop(server: tritonserver.Server) -> None:
    call_with_deadline(server.stop, 60)


def test_python_model_computes_with_auto(backend_directory, stub_env):
    # numpy 2: in-process; numpy<2: through the stub.
    server = start(backend_directory, "numpy-auto")
    try:
        assert server.python_models == ("in-process" if NUMPY2 else "stub")
        server.load(PYTHON_MODEL)
        check_add_sub(server)
    finally:
        stop(server)


def test_python_model_load_through_the_stub_computes_or_is_refused(backend_directory, stub_env):
    server = start(backend_directory, "numpy-load", python_models="stub")
    try:
        assert server.python_models == "stub"
        if NUMPY2:
            with pytest.raises(tritonserver.UnsupportedError) as refused:
                server.load(PYTHON_MODEL)
            assert_numpy_refusal(refused.value, PYTHON_MODEL)
            assert not server.model(PYTHON_MODEL).ready()  # unloaded again
            # The server goes on serving other backends.
            server.load("identity_fp32")
            data = numpy.arange(3, dtype=numpy.float32)
            out = single(server.model("identity_fp32").infer(inputs={"INPUT0": data}))
            numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
            del out
        else:
            server.load(PYTHON_MODEL)
            check_add_sub(server)
    finally:
        stop(server)


def test_python_model_in_the_repository_at_start(backend_directory, stub_env, tmp_path):
    # NONE mode: every model of the repository loads at start().
    for name in (PYTHON_MODEL, "identity_fp32"):
        shutil.copytree(MODELS / name, tmp_path / name)
    options = dict(model_repository=str(tmp_path), model_control_mode=tritonserver.ModelControlMode.NONE,
                   python_models="stub")
    if NUMPY2:
        server = tritonserver.Server(make_options(backend_directory, server_id="numpy-start", log_error=False,
                                                  **options))
        with pytest.raises(tritonserver.UnsupportedError) as refused:
            server.start(wait_until_ready=True, timeout=60)
        assert_numpy_refusal(refused.value, PYTHON_MODEL)
        assert server._server is None  # stopped again: start() may be retried
        # With "auto" the same repository serves (in-process).
        server = start(backend_directory, "numpy-start-auto", **{**options, "python_models": "auto"})
        try:
            check_add_sub(server)
        finally:
            stop(server)
    else:
        server = start(backend_directory, "numpy-start", **options)
        try:
            check_add_sub(server)
        finally:
            stop(server)


def _numpy_major(python: str) -> int:
    out = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"], capture_output=True,
                         text=True, timeout=120)
    return int(out.stdout.split(".")[0]) if out.returncode == 0 else -1


@pytest.mark.skipif(not (NUMPY1_ENV / "bin" / "python3").exists()
                    or _numpy_major(str(NUMPY1_ENV / "bin" / "python3")) != 1,
                    reason=f"needs {NUMPY1_ENV} with numpy<2 (make build)")
def test_named_numpy1_environment_runs_python_models(backend_directory, stub_env):
    # Under numpy 2 this is the fix the refusal names; under numpy<2 it
    # names an environment like the running one.
    stub_env.setenv(_triton_core.STUB_ENVIRONMENT_VARIABLE, str(NUMPY1_ENV))
    server = start(backend_directory, "numpy-named-env")
    try:
        server.load(PYTHON_MODEL)
        check_add_sub(server)
        server.load(BYTES_MODEL)
        text = numpy.array([b"hello", b"", b"\x00world"], dtype=numpy.object_)
        response = single(server.model(BYTES_MODEL).infer(inputs={"IN_STRING": text},
                                                            output_names=["OUT_STRING"]))
        assert response.outputs["OUT_STRING"].to_bytes_array().tolist() == text.tolist()
        del response
    finally:
        stop(server)


def test_named_environment_must_exist(backend_directory, stub_env, tmp_path):
    stub_env.setenv(_triton_core.STUB_ENVIRONMENT_VARIABLE, str(tmp_path / "nope"))
    server = tritonserver.Server(make_options(backend_directory, server_id="numpy-bad-env"))
    with pytest.raises(tritonserver.InvalidArgumentError, match=_triton_core.STUB_ENVIRONMENT_VARIABLE):
        server.start()


def test_main_reports_numpy_and_python_backend(stub_env):
    out = subprocess.run([sys.executable, "-m", "tritonserver"], cwd=ROOT / "tests", capture_output=True,
                         text=True, timeout=120).stdout
    assert f"numpy: {numpy.__version__} (" in out, out  # this process's
    assert f"numpy {numpy.__version__}; this core's stub needs numpy<2" in out, out
    if NUMPY2:
        assert "Python models: in-process (Options.python_models=\"auto\"): numpy 2" in out, out
    else:
        assert "Python models: through the stub (Options.python_models=\"auto\")" in out, out
