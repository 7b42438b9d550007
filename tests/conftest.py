"""Shared fixtures: one embedded server over tests/models, with a backend
folder holding the python backend (from the installed nvidia-pytriton core)
and our C++ identity test backend (built by `make build`)."""

from __future__ import annotations

import gc
import os
import pathlib
import shutil
import threading
import time

import numpy
import pytest

import tritonserver
from tritonserver import _core
from tritonserver._api import _triton_core

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
IDENTITY_LIBRARY = ROOT / "build" / "identity" / "libtriton_identity.so"


def has_gpu() -> bool:
    _triton_core.load_core()
    return _core.cuda_device_count() > 0


def pytest_addoption(parser):
    parser.addoption("--run-stress", action="store_true", help="run the long `stress` tests")


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly where no CUDA device is present; tests
    marked `stress` run only with --run-stress (make stress)."""
    if not config.getoption("--run-stress"):
        long_runs = [item for item in items if item.get_closest_marker("stress")]
        if long_runs:
            config.hook.pytest_deselected(items=long_runs)
            items[:] = [item for item in items if not item.get_closest_marker("stress")]
    if any(item.get_closest_marker("gpu") for item in items) and not has_gpu():
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({_core.cuda_status()})")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def backend_directory(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A backend folder with python/ (links) and identity/ (our backend)."""
    install = _triton_core.load_core()
    folder = tmp_path_factory.mktemp("backends")
    python_links = _triton_core.python_backend_directory(install)
    if python_links is not None:
        (folder / "python").symlink_to(pathlib.Path(python_links) / "python")
    if not IDENTITY_LIBRARY.is_file():
        pytest.fail(f"{IDENTITY_LIBRARY} is missing: run `make build` (or `make test`)")
    (folder / "identity").mkdir()
    shutil.copy(IDENTITY_LIBRARY, folder / "identity" / IDENTITY_LIBRARY.name)
    return str(folder)


def make_options(backend_directory: str, **overrides) -> tritonserver.Options:
    settings = dict(
        model_repository=str(MODELS),
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        backend_directory=backend_directory,
        exit_timeout=10,
        log_error=True,
        metrics=True,
    )
    settings.update(overrides)
    return tritonserver.Options(**settings)


@pytest.fixture(scope="session")
def server(backend_directory: str):
    """The shared server; models are loaded on first use by `model()`."""
    srv = tritonserver.Server(make_options(backend_directory, server_id="shared"))
    srv.start(wait_until_ready=True, timeout=60)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def model(server):
    """model(name) -> a ready Model, loading it once per session."""
    loaded: dict[str, tritonserver.Model] = {}

    def get(name: str) -> tritonserver.Model:
        if name not in loaded:
            server.load(name)
            loaded[name] = server.model(name)
        return loaded[name]

    return get


def assert_no_live_buffers(timeout: float = 5.0) -> None:
    """Every output buffer the allocator handed out has been freed."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        _core.drain_deferred()
        if _core.live_buffer_count() == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{_core.live_buffer_count()} output buffers still alive")
        time.sleep(0.01)


def address(array) -> int:
    """Address of a NumPy array's first byte."""
    return array.__array_interface__["data"][0]


def wait_for(predicate, seconds: float = 10.0) -> bool:
    """Poll `predicate` until true or `seconds` pass; returns its last value."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def call_with_deadline(fn, seconds: float = 60.0):
    """Run fn() in a daemon thread; fail (instead of hanging the suite) if it
    does not return within `seconds`. Returns fn's result or re-raises."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as e:  # re-raised in the caller
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"call did not return within {seconds} s (hang)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def single(iterator) -> tritonserver.InferenceResponse:
    """The one response of a non-decoupled request."""
    responses = list(iterator)
    assert len(responses) == 1, responses
    assert responses[0].final
    return responses[0]


def as_numpy(tensor: tritonserver.Tensor) -> numpy.ndarray:
    return numpy.from_dlpack(tensor)


os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
