"""Shared fixtures: one embedded server over tests/models, with a backend
folder holding the python backend (from the installed nvidia-pytriton core)
and our C++ identity test backend (built by `make build`)."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil

import pytest

import tritonserver
from tritonserver import _native
from tritonserver._api import _triton_core

from common import IDENTITY_LIBRARY, NUMPY2, STUB_SKIP_REASON, has_gpu, make_options

# Markers whose tests run only when asked for (marker -> command-line option).
OPT_IN_MARKERS = {
    "stress": "--run-stress",  # long reliability runs (make stress)
    "ray": "--run-ray",  # a local Ray cluster (make test-ray)
}


def pytest_addoption(parser):
    for marker, option in OPT_IN_MARKERS.items():
        parser.addoption(option, action="store_true", help=f"run the tests marked `{marker}`")


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly where no CUDA device is present; tests
    with an opt-in marker (`stress`, `ray`) run only with its option; under
    numpy 2, tests marked `python_stub` (they test the python backend's stub
    process itself) are skipped: python models run in-process there."""
    for marker, option in OPT_IN_MARKERS.items():
        if config.getoption(option):
            continue
        left_out = [item for item in items if item.get_closest_marker(marker)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]
    if any(item.get_closest_marker("gpu") for item in items) and not has_gpu():
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({_native.cuda_status()})")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
    if NUMPY2:
        skip = pytest.mark.skip(reason=STUB_SKIP_REASON)
        for item in items:
            if item.get_closest_marker("python_stub"):
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


@pytest.fixture(scope="module")
def inproc(backend_directory):
    """A server per test module running python models in-process;
    inproc(name) loads the model on first use and returns it."""
    server = tritonserver.Server(make_options(backend_directory, server_id="inproc", python_models="in-process",
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    assert server.python_models == "in-process"
    loaded: set[str] = set()

    def get(name: str) -> tritonserver.Model:
        if name not in loaded:
            server.load(name)
            loaded.add(name)
        return server.model(name)

    get.server = server  # type: ignore[attr-defined]
    yield get
    server.stop()


os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")


# GPU consumers (tests marked `gpu`; skipped cleanly where absent).
@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    return torch


@pytest.fixture(scope="module")
def loop():
    """An event loop of the test module's own (the KServe routes' tests run their coroutines on it)."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()
