"""Shared fixtures: one embedded server over tests/models, with a backend
folder holding the python backend (from the installed nvidia-pytriton core)
and our C++ identity test backend (built by `make build`)."""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import pathlib
import re
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
# TRITONSERVER_TEST_IDENTITY_LIBRARY: a prebuilt one (the GPU check's bundle).
IDENTITY_LIBRARY = pathlib.Path(os.environ.get("TRITONSERVER_TEST_IDENTITY_LIBRARY")
                                or ROOT / "build" / "identity" / "libtriton_identity.so")


def has_gpu() -> bool:
    _triton_core.load_core()
    return _core.cuda_device_count() > 0


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
    with an opt-in marker (`stress`, `ray`) run only with its option."""
    for marker, option in OPT_IN_MARKERS.items():
        if config.getoption(option):
            continue
        left_out = [item for item in items if item.get_closest_marker(marker)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]
    if any(item.get_closest_marker("gpu") for item in items) and not has_gpu():
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({_core.cuda_status()})")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
    skip_python_backend_tests_under_numpy2(items)


# -- numpy 2 (make test-numpy2, tests/run_numpy2.sh) ---------------------------
# The python backend stub of the Triton 2.51 core (nvidia-pytriton 0.7.0) is
# built against numpy 1.x: under numpy 2 the package refuses python-backend
# models with UnsupportedError (tests/test_python_backend_numpy.py checks
# that). Every other test that needs a python-backend model is skipped
# there, in two ways:
#   - at run time, by the `model` fixture and dedicated_server()
#     (skip_if_python_backend_unusable);
#   - at collection time, for tests that load or run one by another path
#     (their own server, an in-memory config, a fixture of their module): a
#     test is skipped when its source, or that of a fixture from its own
#     module, matches _python_model_use() below.
NUMPY2_SKIP_REASON = "the python backend stub of this Triton core needs numpy<2"
NUMPY2 = int(numpy.__version__.split(".")[0]) >= 2
_PYTHON_BACKEND = re.compile(r'(?m)^\s*backend:\s*"python"')


def is_python_backend_model(name: str) -> bool:
    """True when tests/models/<name>/config.pbtxt says backend "python"."""
    config = MODELS / name / "config.pbtxt"
    return config.is_file() and _PYTHON_BACKEND.search(config.read_text()) is not None


def skip_if_python_backend_unusable(name: str) -> None:
    if NUMPY2 and is_python_backend_model(name):
        pytest.skip(NUMPY2_SKIP_REASON)


def _python_model_use() -> re.Pattern:
    """Source text that loads or runs a python-backend model other than
    through `model()`: .load("<python model>"), .model("<python model>")
    followed by .infer / .async_infer, or an in-memory config with
    "backend": "python". Model names come from tests/models and
    examples/models. A mere mention (a metric label, a handle that is never
    run) does not match."""
    names = sorted(config.parent.name for folder in (MODELS, ROOT / "examples" / "models")
                   for config in folder.glob("*/config.pbtxt")
                   if _PYTHON_BACKEND.search(config.read_text()))
    name = "|".join(map(re.escape, names)) or "(?!)"
    return re.compile(
        rf"""\.load\(\s*["']({name})["']"""
        rf"""|\.model\(\s*["']({name})["'][^)]*\)\s*\.(async_)?infer\b"""
        r"""|["']backend["']\s*:\s*["']python["']""")


# Tests that run python-backend models from code outside their own source
# (so _python_model_use() cannot see it): the user guide's code blocks use
# examples/models/text_stats.
NUMPY2_PYTHON_BACKEND_TESTS = {"test_docs.py::test_user_guide_blocks_run"}


def skip_python_backend_tests_under_numpy2(items) -> None:
    if not NUMPY2:
        return
    pattern = _python_model_use()
    skip = pytest.mark.skip(reason=NUMPY2_SKIP_REASON)
    for item in items:
        if any(item.nodeid.endswith(test) for test in NUMPY2_PYTHON_BACKEND_TESTS):
            item.add_marker(skip)
            continue
        function = getattr(item, "function", None)
        if function is None:
            continue
        sources = [function]
        # Fixtures defined in the test's own module (not conftest.py).
        fixture_info = getattr(item, "_fixtureinfo", None)
        for defs in (fixture_info.name2fixturedefs.values() if fixture_info else ()):
            for fixturedef in defs:
                if getattr(fixturedef.func, "__module__", None) == function.__module__:
                    sources.append(fixturedef.func)
        for source in sources:
            try:
                text = inspect.getsource(source)
            except (OSError, TypeError):
                continue
            if pattern.search(text):
                item.add_marker(skip)
                break


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


@contextlib.contextmanager
def dedicated_server(backend_directory: str, server_id: str, models: list[str], exit_timeout: int = 10,
                     stop_errors_ok: bool = False):
    """A server of the test's own with `models` loaded. The test may stop it;
    otherwise it is stopped at the end (within exit_timeout + 30 s: a hang
    detector), its TritonError ignored only with `stop_errors_ok`. Under
    numpy 2 a test whose `models` include a python-backend model is skipped
    (loading one there raises UnsupportedError)."""
    for name in models:
        skip_if_python_backend_unusable(name)
    srv = tritonserver.Server(make_options(backend_directory, server_id=server_id, exit_timeout=exit_timeout,
                                           log_error=False))
    srv.start(wait_until_ready=True, timeout=60)
    try:
        for name in models:
            srv.load(name)
        yield srv
    finally:
        if srv._server is not None:
            try:
                call_with_deadline(srv.stop, exit_timeout + 30)
            except tritonserver.TritonError:
                if not stop_errors_ok:
                    raise


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
            skip_if_python_backend_unusable(name)
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


def run_loops_in_threads(make_main, count: int, seconds: float = 60.0) -> dict:
    """asyncio.run(make_main(t)) in `count` threads at once (one event loop
    each); their results by thread index. Fails on a hang or an exception."""
    import asyncio

    results: dict = {}
    errors: list[BaseException] = []

    def thread_main(t: int) -> None:
        try:
            results[t] = asyncio.run(make_main(t))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=thread_main, args=(t,)) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds)
    assert not any(thread.is_alive() for thread in threads), "an event loop hung"
    assert not errors, errors
    assert sorted(results) == list(range(count))
    return results


def single(iterator) -> tritonserver.InferenceResponse:
    """The one response of a non-decoupled request."""
    responses = list(iterator)
    assert len(responses) == 1, responses
    assert responses[0].final
    return responses[0]


def as_numpy(tensor: tritonserver.Tensor) -> numpy.ndarray:
    return numpy.from_dlpack(tensor)


os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
