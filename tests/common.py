"""Test helpers and constants shared by the test files (tests import them
`from common import ...`); conftest.py holds only fixtures and hooks."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import numpy
import pytest

import tritonserver
from tritonserver import _native
from tritonserver._api import _triton_core

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
# TRITONSERVER_TEST_IDENTITY_LIBRARY: a prebuilt one (the GPU check's bundle).
IDENTITY_LIBRARY = pathlib.Path(os.environ.get("TRITONSERVER_TEST_IDENTITY_LIBRARY")
                                or ROOT / "build" / "identity" / "libtriton_identity.so")


def has_gpu() -> bool:
    _triton_core.load_core()
    return _native.cuda_device_count() > 0


# -- numpy 2 (make test-numpy2, tests/run_numpy2.sh) ---------------------------
# The python backend stub of the Triton 2.51 core (nvidia-pytriton 0.7.0) is
# built against numpy 1.x. Under numpy 2 the package runs python-backend
# models in-process instead (Options.python_models="auto"), so those tests
# run there too. Tests of the stub itself are marked `python_stub`: they are
# skipped where the stub cannot run correctly (conftest.py), with this
# reason.
STUB_SKIP_REASON = "the python backend stub of this Triton core needs numpy<2 (python models run in-process here)"
NUMPY2 = int(numpy.__version__.split(".")[0]) >= 2


# TRITONSERVER_TEST_GPU_METRICS=0 turns GPU metrics (the core's bundled
# DCGM, started and stopped with every server) off in every test server:
# the GPU check (tests/gpu/run_gpu_checks.sh) sets it for its test phases,
# where a DCGM start or stop that hangs would cost the whole run, and tries
# GPU metrics once, last, in a process of their own.
GPU_METRICS = os.environ.get("TRITONSERVER_TEST_GPU_METRICS", "1") != "0"


def make_options(backend_directory: str, **overrides) -> tritonserver.Options:
    settings = dict(
        model_repository=str(MODELS),
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        backend_directory=backend_directory,
        exit_timeout=10,
        log_error=True,
        metrics=True,
        gpu_metrics=GPU_METRICS,
    )
    if os.environ.get("TRITONSERVER_TEST_CACHE_DIRECTORY"):  # the GPU check: under its scratch folder
        settings["cache_directory"] = os.environ["TRITONSERVER_TEST_CACHE_DIRECTORY"]
    settings.update(overrides)
    return tritonserver.Options(**settings)


@contextlib.contextmanager
def dedicated_server(backend_directory: str, server_id: str, models: list[str], exit_timeout: int = 10,
                     stop_errors_ok: bool = False, **overrides):
    """A server of the test's own with `models` loaded (`overrides`: more
    Options fields). The test may stop it; otherwise it is stopped at the
    end (within exit_timeout + 30 s: a hang detector), its TritonError
    ignored only with `stop_errors_ok`. Under numpy 2 python-backend models
    run in-process (Options.python_models "auto")."""
    overrides.setdefault("log_error", False)
    srv = tritonserver.Server(make_options(backend_directory, server_id=server_id, exit_timeout=exit_timeout,
                                           **overrides))
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


# The extension's test hooks (its `testing` submodule: live-buffer registry,
# host-pool counter, drain, ELF reader), built by the test build (CMake
# option TRITONSERVER_TESTING: make build, run_asan.sh, run_numpy2.sh, the
# GPU bundle), never into a wheel. test_api_surface.py checks the test build
# has them; without them the tests that need them skip.
HOOKS = getattr(_native, "testing", None)


def hooks():
    """The test hooks; skips the calling test when the extension was built
    without them."""
    if HOOKS is None:
        pytest.skip("the extension was built without its test hooks "
                    "(-C cmake.define.TRITONSERVER_TESTING=ON, as `make build` does)")
    return HOOKS


def assert_no_live_buffers(timeout: float = 5.0) -> None:
    """Every output buffer the allocator handed out has been freed."""
    registry = hooks()
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        registry.drain_deferred()
        if registry.live_buffer_count() == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{registry.live_buffer_count()} output buffers still alive")
        time.sleep(0.01)


def drain_deferred() -> None:
    """Run the Python releases deferred from Triton's threads now (without
    the test hooks: wait for the releaser thread, which runs them within
    20 ms)."""
    if HOOKS is not None:
        HOOKS.drain_deferred()
    else:
        time.sleep(0.1)


def settle(trim_host_pool: bool = False) -> None:
    """Collect garbage (three passes: cycles freed by one pass may hold
    more), run the Python releases deferred from Triton's threads and, with
    `trim_host_pool`, return the host pool's idle blocks."""
    for _ in range(3):
        gc.collect()
    drain_deferred()
    if trim_host_pool:
        _native.host_pool_trim()


class DLPackOnly:
    """An object that speaks DLPack and nothing else (wraps an array)."""

    def __init__(self, array) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


# Host inputs up to this size are copied when a request is built (cpp/request.h,
# kCopiedInputMaxBytes); larger ones are passed to Triton by pointer and
# kept alive until Triton releases the request. Tests of the zero-copy path
# and of input lifetimes use inputs over it.
COPIED_INPUT_MAX_BYTES = 64 * 1024
# FP32 elements of the smallest input passed by pointer.
BY_POINTER_FP32 = COPIED_INPUT_MAX_BYTES // 4 + 1


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


async def until(predicate, seconds: float = 60.0) -> None:
    """Let the running event loop turn until `predicate()` is true; raises
    TimeoutError after `seconds`."""
    async def turns() -> None:
        while not predicate():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(turns(), seconds)


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


def concurrent_rows(model: tritonserver.Model, count: int) -> list[numpy.ndarray]:
    """Sends `count` requests at once from asyncio, request i with input X
    a float32 row of four i's, and returns each one's output Y (the last
    response's), in order: what a batching model gives back per request."""

    async def main():
        async def one(i):
            x = numpy.full((1, 4), i, numpy.float32)
            responses = [r async for r in model.async_infer(inputs={"X": x})]
            return as_numpy(responses[-1].outputs["Y"]).copy()

        return await asyncio.gather(*[one(i) for i in range(count)])

    return asyncio.run(main())


def as_numpy(tensor: tritonserver.Tensor) -> numpy.ndarray:
    return numpy.from_dlpack(tensor)


def identity(m: tritonserver.Model, data) -> numpy.ndarray:
    """What identity model `m` answers for `data` (one response, no error),
    within a deadline."""
    response = call_with_deadline(lambda: single(m.infer(inputs={"INPUT0": data})))
    assert response.error is None
    return as_numpy(response.outputs["OUTPUT0"])


def fp32(*values) -> numpy.ndarray:
    return numpy.array(values, dtype=numpy.float32)


def streaming_inputs(count: int, delay_ms: int = 0) -> dict:
    """The inputs of the `streaming` model: `count` responses, each after
    `delay_ms`."""
    inputs = {"COUNT": numpy.array([count], dtype=numpy.int32)}
    if delay_ms:
        inputs["DELAY_MS"] = numpy.array([delay_ms], dtype=numpy.int32)
    return inputs


def python_model_repository(tmp_path, name: str, source: str, decoupled: bool = False, extra_config: str = "",
                            instances: int = 1):
    """A repository with one add_sub-shaped python model `name` running
    `source` (its model.py) on `instances` instances, its config extended
    by `extra_config`."""
    repo = tmp_path / "repo"
    (repo / name / "1").mkdir(parents=True)
    config = (MODELS / "add_sub" / "config.pbtxt").read_text().replace('"add_sub"', f'"{name}"')
    assert "count: 1 }" in config, "add_sub's config changed: its instance count is set here"
    config = config.replace("count: 1 }", f"count: {instances} }}") + extra_config
    if decoupled:
        config += "model_transaction_policy { decoupled: true }\n"
    (repo / name / "config.pbtxt").write_text(config)
    (repo / name / "1" / "model.py").write_text(source)
    return repo


GATE_MODEL = """
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

STARTED, RELEASE = {started!r}, {release!r}


class TritonPythonModel:
    def execute(self, requests):
        open(STARTED, "w").close()
        while not os.path.exists(RELEASE):
            time.sleep(0.01)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.0], np.float32))])
                for _ in requests]
"""


def gate_model_repository(tmp_path, name: str = "gate"):
    """A repository (tmp_path/<name>-repo) with one python model `name`
    (input SECONDS, output OUT, FP32 [1], as `sleep`) whose execute() creates
    the file `started` and then answers once the file `release` exists: a
    request observably in flight for as long as a test needs. Returns
    (repository, started, release)."""
    repo = tmp_path / f"{name}-repo"
    (repo / name / "1").mkdir(parents=True)
    started, release = tmp_path / f"{name}-started", tmp_path / f"{name}-release"
    config = (MODELS / "sleep" / "config.pbtxt").read_text().replace('"sleep"', f'"{name}"')
    (repo / name / "config.pbtxt").write_text(config)
    (repo / name / "1" / "model.py").write_text(GATE_MODEL.format(started=str(started), release=str(release)))
    return repo, started, release


def copy_model(name: str, destination, new_name: str | None = None):
    """Copy config.pbtxt and 1/ (model.py for python models) of a test model."""
    target = destination / (new_name or name)
    (target / "1").mkdir(parents=True)
    config = (MODELS / name / "config.pbtxt").read_text()
    if new_name is not None:
        config = config.replace(f'name: "{name}"', f'name: "{new_name}"')
    (target / "config.pbtxt").write_text(config)
    if (MODELS / name / "1" / "model.py").is_file():
        shutil.copy(MODELS / name / "1" / "model.py", target / "1" / "model.py")
    return target


class refused:
    """Like pytest.raises (class, optional regex searched in the message),
    but first clears the locals of the finished frames of the traceback.

    A TritonError or TypeError raised by infer() keeps, through its
    traceback, the native request that infer() was building and its inputs;
    while it is alive the request pins its model (Server.stop() then waits
    the whole exit timeout) and the inputs stay alive (which a leak check
    would count). pytest keeps the traceback of every failed test until the
    session ends, after the shared server stopped."""

    def __init__(self, expected, match: str | None = None) -> None:
        self.expected = expected
        self.pattern = match
        self.kind: type | None = None
        self.message = ""

    def __enter__(self) -> "refused":
        return self

    def __exit__(self, kind, value, tb) -> bool:
        if tb is not None:
            traceback.clear_frames(tb)
        if kind is None:
            raise AssertionError(f"accepted; expected {self.expected}")
        self.kind, self.message = kind, str(value)
        if not issubclass(kind, self.expected):
            raise AssertionError(f"expected {self.expected}, got {kind.__name__}: {self.message}")
        if self.pattern is not None and not re.search(self.pattern, self.message):
            raise AssertionError(f"{kind.__name__} message {self.message!r} does not match {self.pattern!r}")
        return True


def live_tensors() -> int:
    """Live tritonserver.Tensor objects, counted as NVIDIA's test_api.py
    counts them (after a full collection)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, tritonserver.Tensor))


def rss_bytes() -> int:
    """Resident set size of this process."""
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def default_sigint() -> None:
    """preexec_fn for a child a test interrupts with SIGINT: the default
    disposition, so that Python installs its KeyboardInterrupt handler even
    when this test run was started with SIGINT ignored (a background job of a
    non-interactive shell: its children inherit SIG_IGN, and Python then
    never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_script(code: str, tmp_path, timeout: float, env: dict[str, str] | None = None,
               cwd: pathlib.Path | None = None) -> tuple[int, str, str]:
    """Run `code` in a fresh interpreter (in `cwd`, by default tests/, so
    `from common import` works and the installed package is imported), with
    `env` added to the environment. Output goes to files, not pipes:
    python backend stubs that outlive a crashed parent would hold pipes
    open. Returns (rc, stdout, stderr)."""
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd or ROOT / "tests",
                                   stdout=out, stderr=err, start_new_session=True,
                                   env=None if env is None else {**os.environ, **env})
        try:
            rc = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"the interpreter did not exit within {timeout} s (hang): "
                                 f"{out_path.read_text()} {err_path.read_text()[-2000:]}") from None
    return rc, out_path.read_text(), err_path.read_text()


@contextlib.contextmanager
def kserve_over_http(routes):
    """`routes` (a KServeRoutes) served over real HTTP/1.1 on loopback, as a
    web framework would serve them: http.server's threads read requests,
    one event-loop thread runs routes.handle(). Yields "127.0.0.1:port",
    the url for tritonclient.http.InferenceServerClient."""
    import http.server
    import urllib.parse

    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, name="kserve-loop", daemon=True)
    loop_thread.start()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as tritonclient expects

        def answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = asyncio.run_coroutine_threadsafe(
                routes.handle(self.command, path, headers, body), loop).result(60)
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = answer

        def log_message(self, *args) -> None:  # quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server_thread = threading.Thread(target=httpd.serve_forever, name="kserve-http", daemon=True)
    server_thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        server_thread.join(30)
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(30)
        loop.close()


@contextlib.contextmanager
def kserve_grpc(server, **options):
    """A started KServeGrpc serving `server` on a free port of loopback
    (`options`: more KServeGrpc.Options fields); yields it (its url for
    tritonclient.grpc: f"127.0.0.1:{frontend.port}"). Stopped at the end."""
    from tritonserver.frontend import KServeGrpc

    frontend = KServeGrpc(server, KServeGrpc.Options(address="127.0.0.1", port=0, **options))
    frontend.start()
    try:
        yield frontend
    finally:
        call_with_deadline(frontend.stop, 60)


# -- Server processes: NVIDIA's tritonserver binary, `python -m tritonserver serve` --
# NVIDIA's tritonserver 2.51 executable (bin/tritonserver of the
# nvidia-pytriton 0.7.0 wheel) is the reference of the network frontends:
# a test runs the same requests against it and against this package's
# `python -m tritonserver serve`, which takes the binary's flag names, so
# one test runs both by changing the command's argv prefix.

def _pytriton_site() -> pathlib.Path | None:
    """The site-packages folder holding nvidia-pytriton's tree, or None."""
    install = _triton_core.find_core()
    if os.path.basename(install.library_folder) != "nvidia_pytriton.libs":
        return None
    return pathlib.Path(install.library_folder).parent


_REFERENCE_PROBE: dict[str, str | None] = {}


def reference_binary() -> pathlib.Path:
    """NVIDIA's tritonserver executable; skips the calling test, saying why,
    when there is none or it cannot run here."""
    site = _pytriton_site()
    if site is None:
        pytest.skip("NVIDIA's tritonserver binary comes from the nvidia-pytriton wheel, and this Triton core "
                    f"is not one ({_triton_core.find_core().library})")
    binary = site / "pytriton" / "tritonserver" / "bin" / "tritonserver"
    if str(binary) not in _REFERENCE_PROBE:
        reason = None
        if not binary.is_file():
            reason = f"NVIDIA's tritonserver binary is missing: {binary} (nvidia-pytriton without it)"
        else:
            try:
                probe = subprocess.run([str(binary), "--help"], env=_reference_env(), capture_output=True,
                                       text=True, timeout=60)
                if "--model-repository" not in probe.stdout + probe.stderr:
                    reason = (f"NVIDIA's tritonserver binary {binary} cannot run here (exit {probe.returncode}): "
                              f"{(probe.stderr or probe.stdout)[-500:]}")
            except (OSError, subprocess.TimeoutExpired) as e:
                reason = f"NVIDIA's tritonserver binary {binary} cannot run here: {e}"
        _REFERENCE_PROBE[str(binary)] = reason
    if _REFERENCE_PROBE[str(binary)] is not None:
        pytest.skip(_REFERENCE_PROBE[str(binary)])
    return binary


def _reference_env() -> dict[str, str]:
    """The binary's environment: the wheel's libraries and this Python's
    libpython on the library path (the python backend stub embeds it),
    this environment's bin/ first on PATH (the stub's Python finds this
    environment's numpy)."""
    import sysconfig

    site = _pytriton_site()
    libraries = [str(site / "nvidia_pytriton.libs")] if site is not None else []
    libraries.append(sysconfig.get_config_var("LIBDIR") or "")
    if os.environ.get("LD_LIBRARY_PATH"):
        libraries.append(os.environ["LD_LIBRARY_PATH"])
    # Under tests/run_asan.sh: the sanitizers' settings are for this
    # package's code; NVIDIA's binary and its stubs run as they ship (with
    # libasan preloaded, the binary hangs at exit once a stub ran).
    sanitizer = {"LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "BASH_ENV"}
    return {**{k: v for k, v in os.environ.items() if k not in sanitizer}, "LD_LIBRARY_PATH": ":".join(libraries),
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


def reference_backend_directory() -> pathlib.Path:
    """A backend folder for a server process (the binary, or the package's
    serve command): python/ with real copies of the wheel's python backend
    and of the stub for this Python (the binary does not follow the
    package's cache links), identity/ with the test backend. Made once
    under build/ (a fresh folder renamed into place)."""
    import tempfile

    if not IDENTITY_LIBRARY.is_file():
        pytest.fail(f"{IDENTITY_LIBRARY} is missing: run `make build` (or `make test`)")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    folder = ROOT / "build" / f"reference-backends-py{version}"
    if (folder / ".complete").is_file():
        # The latest build's, as a new file renamed over the old one: a
        # running server keeps the copy it mapped (one overwritten in place
        # crashes it).
        target = folder / "identity" / IDENTITY_LIBRARY.name
        if target.read_bytes() != IDENTITY_LIBRARY.read_bytes():
            fresh = target.with_name(f"{target.name}.{os.getpid()}")
            shutil.copy(IDENTITY_LIBRARY, fresh)
            os.replace(fresh, target)
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    fresh = pathlib.Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    install = _triton_core.find_core()
    if install.python_backend is not None:
        library, utils, stubs = install.python_backend
        stub = pathlib.Path(stubs) / version / "triton_python_backend_stub"
        if stub.is_file():
            (fresh / "python").mkdir()
            for source in (library, utils, stub):
                shutil.copy2(source, fresh / "python" / os.path.basename(source))
    (fresh / "identity").mkdir()
    shutil.copy(IDENTITY_LIBRARY, fresh / "identity" / IDENTITY_LIBRARY.name)
    (fresh / ".complete").touch()
    try:
        fresh.rename(folder)
    except OSError:  # another process made it first
        shutil.rmtree(fresh, ignore_errors=True)
    return folder


def free_port() -> int:
    """A TCP port free on loopback now (a server bound later may, rarely,
    lose it to another process: server_process retries then)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reference_command() -> list[str]:
    """The argv prefix that runs NVIDIA's binary (skips when it cannot run)."""
    return [str(reference_binary())]


def run_reference(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Runs NVIDIA's binary with `args` to its exit (skips when it cannot
    run): its exit status and output, as text."""
    return subprocess.run([*reference_command(), *args], env=_reference_env(), capture_output=True, text=True,
                          timeout=timeout)


def package_serve_command() -> list[str]:
    """The argv prefix that runs this package's server with the binary's
    flag names."""
    return [sys.executable, "-m", "tritonserver", "serve"]


# A frontend's "Started <service> at <address>:<port>": NVIDIA's binary logs
# it (quoted), `python -m tritonserver serve` says it on stderr, once the
# frontend listens.
SERVICE_STARTED = re.compile(r'Started (HTTPService|GRPCInferenceService|Metrics Service) at (\S+):(\d+)"?$', re.M)
# The flag that turns each frontend off (the binary's names).
_SERVICE_FLAGS = {"HTTPService": "--allow-http", "GRPCInferenceService": "--allow-grpc",
                  "Metrics Service": "--allow-metrics"}


def _flag_value(flags, name: str) -> str | None:
    """The last value `flags` give `name` ("--name=value" or "--name value")."""
    value = None
    for i, arg in enumerate(flags):
        if arg.startswith(f"{name}="):
            value = arg.split("=", 1)[1]
        elif arg == name and i + 1 < len(flags):
            value = flags[i + 1]
    return value


class ServerProcess:
    """A server process started by server_process(): its ports on
    127.0.0.1 (as its "Started ... at" lines say), urls in tritonclient's
    form ("127.0.0.1:port"), the Popen, its log (stdout and stderr
    together) and how long it took to be ready."""

    def __init__(self, argv: list[str], process: subprocess.Popen, log_path: pathlib.Path,
                 http_port: int, grpc_port: int, metrics_port: int) -> None:
        self.argv, self.process, self.log_path = argv, process, log_path
        self.http_port, self.grpc_port, self.metrics_port = http_port, grpc_port, metrics_port
        self.ready_seconds = 0.0  # from the process's start to ready
        # Started with --log-info false: the binary then logs no "Started
        # ... at" line; with --log-file it logs it there; readiness is then
        # its ports answering.
        self.quiet = ((_flag_value(argv, "--log-info") or "true").lower() in ("false", "0", "off", "no")
                      or _flag_value(argv, "--log-file") is not None)

    def _ports(self) -> dict[str, int]:
        return {"HTTPService": self.http_port, "GRPCInferenceService": self.grpc_port,
                "Metrics Service": self.metrics_port}

    http_url = property(lambda self: f"127.0.0.1:{self.http_port}")
    grpc_url = property(lambda self: f"127.0.0.1:{self.grpc_port}")
    metrics_url = property(lambda self: f"127.0.0.1:{self.metrics_port}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def serving(self, services: set[str]) -> bool:
        """Whether every frontend in `services` said "Started ... at" (its
        port taken from that line; when quiet, its port accepts a
        connection) and, with HTTP among them, GET /v2/health/ready
        answers 200."""
        started = {name: int(port) for name, _, port in SERVICE_STARTED.findall(self.log())}
        if not started.keys() >= services:
            # The binary with --log-info false says nothing: its ports answer.
            return self.quiet and all(_listening(port) for name, port in self._ports().items() if name in services) \
                and ("HTTPService" not in services or _ready(self.http_url))
        self.http_port = started.get("HTTPService", self.http_port)
        self.grpc_port = started.get("GRPCInferenceService", self.grpc_port)
        self.metrics_port = started.get("Metrics Service", self.metrics_port)
        return "HTTPService" not in services or _ready(self.http_url)

    def cpu_seconds(self) -> float:
        """User + system CPU time used by the server's live processes: its
        own and its process group's (python backend stubs), from /proc."""
        ticks = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:  # exited meanwhile
                continue
            if int(fields[2]) == self.pid:  # its process group
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait up to `timeout` s; on a hang, SIGKILL to its
        whole process group (python backend stubs too) and fail. Returns
        the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                raise AssertionError(f"{self.argv[0]} did not exit within {timeout} s of SIGTERM (hang): "
                                     f"{self.log()[-3000:]}") from None
        return self.process.returncode


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def _ready(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{url}/v2/health/ready", timeout=2) as reply:
            return reply.status == 200
    except (OSError, urllib.error.URLError):
        return False


@contextlib.contextmanager
def server_process(command: list[str], model_repository: str | os.PathLike, flags: list[str] = (),
                   env: dict[str, str] | None = None, backend_directory: str | os.PathLike | None = None,
                   log_dir: str | os.PathLike | None = None, ready_timeout: float = 120.0,
                   stop_timeout: float = 60.0):
    """The one launcher of server processes: runs `command` (an argv
    prefix: reference_command() or package_serve_command()) +
    --model-repository, --backend-directory (default:
    reference_backend_directory()), free --http-port/--grpc-port/
    --metrics-port on 127.0.0.1, then `flags` (e.g. ["--model-control-mode",
    "explicit", "--load-model", "identity_fp32"]; a port given there wins,
    0 included: the ports are read back from the log). Yields a
    ServerProcess once every frontend `flags` leave on said "Started ...
    at" and, with HTTP on, GET /v2/health/ready answers 200 (polled), and
    stops it at the end (stop(); its exit status stays in
    .process.returncode). Fails with the log's tail when the process exits
    before ready or is not ready within `ready_timeout`."""
    import tempfile

    if env is None:  # the binary's libraries for the binary; as is for the package
        site = _pytriton_site()
        binary = site and site / "pytriton" / "tritonserver" / "bin" / "tritonserver"
        env = _reference_env() if command[0] == str(binary) else dict(os.environ)
    backends = str(backend_directory or reference_backend_directory())
    services = {name for name, flag in _SERVICE_FLAGS.items()
                if (_flag_value(flags, flag) or "true").lower() not in ("false", "0", "off", "no")}
    log_folder = pathlib.Path(log_dir) if log_dir is not None else pathlib.Path(tempfile.mkdtemp(prefix="server-"))
    for attempt in range(3):  # a port taken between free_port() and the bind: new ports
        ports = free_port(), free_port(), free_port()
        argv = [*command, "--model-repository", str(pathlib.Path(model_repository).resolve()),
                "--backend-directory", backends,
                "--http-address", "127.0.0.1", "--http-port", str(ports[0]),
                "--grpc-address", "127.0.0.1", "--grpc-port", str(ports[1]),
                "--metrics-address", "127.0.0.1", "--metrics-port", str(ports[2]), *flags]
        log_path = log_folder / f"server-{attempt}.log"
        # Output to a file, not a pipe: stubs that outlive the server would
        # hold a pipe open.
        # From tests/: `python -m tritonserver` imports the installed package.
        started = time.monotonic()
        with open(log_path, "w") as log:
            # A process group of its own (killpg reaches its stubs), in this
            # session: a session of its own would be a scheduling group of
            # its own too (the kernel's autogroup), sharing the CPUs with a
            # client of this session group against group, not thread
            # against thread; perf_analyzer's HTTP clients then stall for
            # tens of seconds (against NVIDIA's binary too).
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, cwd=ROOT / "tests", process_group=0)
        server = ServerProcess(argv, process, log_path, *ports)
        if not wait_for(lambda: process.poll() is not None or server.serving(services), ready_timeout):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"{argv} not ready within {ready_timeout} s: {server.log()[-3000:]}")
        if process.poll() is None:
            server.ready_seconds = time.monotonic() - started
            break
        text = server.log()
        if "address already in use" not in text.lower() or attempt == 2:
            raise AssertionError(f"{argv} exited ({process.returncode}) before it was ready: {text[-3000:]}")
    try:
        yield server
    finally:
        server.stop(stop_timeout)


def pytriton_config(**fields):
    """A tritonserver.pytriton TritonConfig serving in-process clients only
    (no ports), GPU metrics as the suite's setting; `fields` override."""
    from tritonserver.pytriton.triton import TritonConfig

    settings = dict(allow_http=False, allow_grpc=False, allow_metrics=False, allow_gpu_metrics=GPU_METRICS,
                    exit_timeout_secs=10)
    settings.update(fields)
    return TritonConfig(**settings)


# One sample per KServe datatype (tests of the routes' codec and of their native path).
KSERVE_SAMPLES = {
    "BOOL": numpy.array([True, False, True]),
    "UINT8": numpy.array([0, 255], dtype=numpy.uint8),
    "UINT16": numpy.array([0, 65535], dtype=numpy.uint16),
    "UINT32": numpy.array([0, 2**32 - 1], dtype=numpy.uint32),
    "UINT64": numpy.array([0, 2**64 - 1], dtype=numpy.uint64),
    "INT8": numpy.array([-128, 127], dtype=numpy.int8),
    "INT16": numpy.array([-(2**15), 2**15 - 1], dtype=numpy.int16),
    "INT32": numpy.array([-(2**31), 2**31 - 1], dtype=numpy.int32),
    "INT64": numpy.array([-(2**63), 2**63 - 1], dtype=numpy.int64),
    "FP16": numpy.array([0.5, -1.25, 65504.0], dtype=numpy.float16),
    "FP32": numpy.array([1.5, -2.25, 3.0e38], dtype=numpy.float32),
    "FP64": numpy.array([1.0e-300, -2.5, 1.0e300], dtype=numpy.float64),
    "BYTES": numpy.array([b"hello", "w\u00f6rld".encode(), b""], dtype=object),
}

