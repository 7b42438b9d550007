"""Server options: the official ``Options`` dataclass and its validation.

Constructing Options never fails; ``Server.start()`` validates every field
(TypeError naming the field for a wrong type, InvalidArgumentError for a
missing model repository) and turns them into the core's server options.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, ClassVar, NoReturn, Optional, TypedDict, Union

from .. import _native
from . import _checks as checks
from . import _logging, _triton_core
from ._enums import InstanceGroupKind, LogFormat, LogLevel, ModelControlMode, RateLimitMode
from ._errors import InvalidArgumentError
from ._python_backend_layout import MODES as PYTHON_MODELS_MODES
from ._python_backend_layout import PythonModels, PythonModelsMode
from ._python_backend_layout import announce as announce_python_models
from ._python_backend_layout import choose as choose_python_models
from ._python_backend_layout import package_backend_directory

uint = Annotated[int, "unsigned"]

# Defaults that point at an NGC install; replaced by the discovered core's
# own folders when left as they are and absent on this machine.
DEFAULT_BACKEND_DIRECTORY = "/opt/tritonserver/backends"
DEFAULT_REPO_AGENT_DIRECTORY = "/opt/tritonserver/repoagents"
DEFAULT_CACHE_DIRECTORY = "/opt/tritonserver/caches"


@dataclass(slots=True)
class RateLimiterResource:
    """A resource the rate limiter hands out (``Options.rate_limiter_resources``).

    Attributes:
        name: The resource's name, as model configs name it in their
            ``rate_limiter`` settings.
        count: How many units of it there are.
        device: The GPU it belongs to (its id), for a per-device resource.
    """

    name: str
    count: uint
    device: uint


@dataclass(slots=True)
class ModelLoadDeviceLimit:
    """Fraction of a device's memory that model loading may use
    (``Options.model_load_device_limits``).

    Attributes:
        kind: The kind of device (``InstanceGroupKind.GPU`` for a GPU).
        device: The device's id.
        fraction: The limit, between 0 and 1: a model load is refused while
            the device's memory in use is above this fraction of its total.
    """

    kind: InstanceGroupKind
    device: uint
    fraction: float


@dataclass(slots=True)
class Options:
    """Options of an in-process Triton server: the official field set, and
    ``python_models``. ``Server(**fields)`` makes them for you. Making
    Options never fails; ``Server.start()`` checks every field (a TypeError
    names a field of the wrong type) and does not change them.

    Attributes:
        model_repository: The model repository: a folder holding one folder
            per model, or a list of such folders. Without one (an empty
            list, the default) the server serves only the models that
            ``Server.bind()`` and ``Server.load()`` with in-memory files
            add, and runs in EXPLICIT mode whatever ``model_control_mode``
            says.
        server_id: The server's name, reported as ``name`` by
            ``Server.metadata()``.
        model_control_mode: Which models are loaded, and when. ``NONE``: every
            model of the repository, at start, and no changes after.
            ``POLL``: every model at start; ``Server.poll_model_repository()``
            applies later changes of the repository. ``EXPLICIT``: only
            ``startup_models`` at start; the others by ``Server.load()``.
        startup_models: In ``EXPLICIT`` mode, the models loaded at start
            (``"*"`` for every model of the repository).
        strict_model_config: If true, every model needs a complete
            ``config.pbtxt``; if false, the backend fills in what a model's
            config leaves out, where it can (inputs, outputs, batching).
        rate_limiter_mode: ``OFF``: model instances run as requests arrive.
            ``EXEC_COUNT``: an instance runs only when the resources its
            model config asks for are free (``rate_limiter_resources``).
        rate_limiter_resources: The resources the rate limiter hands out:
            ``RateLimiterResource(name, count, device)`` entries. A resource
            left out has as many units as the most that one model instance
            asks for.
        pinned_memory_pool_size: Bytes of page-locked host memory the core may
            allocate to speed up copies between host and GPU (256 MiB).
        cuda_memory_pool_sizes: Bytes of memory the core reserves on each GPU
            for its own buffers, by device id (e.g. ``{0: 1 << 28}``); a GPU
            left out gets the core's default (64 MiB).
        cache_config: The response cache, by cache implementation, e.g.
            ``{"local": {"size": 1048576}}`` (bytes). Models opt in with
            ``response_cache { enable: true }`` in their config. Empty: no
            cache.
        cache_directory: Where the core looks for cache implementations;
            left at its default and absent here, the folder of the Triton
            core in use.
        min_supported_compute_capability: GPUs of a lower CUDA compute
            capability are not used.
        exit_on_error: If true, ``Server.start()`` fails when a model fails
            to load at start; if false, the server starts without it.
        strict_readiness: If true, ``Server.ready()`` is true only while
            every model is ready; if false, while the server is live.
        exit_timeout: Seconds ``Server.stop()`` waits for requests in flight
            and for the models to unload; at least 1.
        buffer_manager_thread_count: Threads the core adds to speed up the
            copies of input and output tensors; 0 adds none.
        model_load_thread_count: Threads that load models in parallel.
        model_load_retry_count: How many more times the core tries to load a
            model whose load failed.
        model_namespacing: If true, models of the same name may be served
            from different repositories (each repository its namespace).
        enable_peer_access: If true, the core tries to enable peer access
            between GPUs (direct copies from one to another), where the
            system allows it.
        log_file: A file the core writes the lines of the levels below to
            (not opened when every level is off). ``None``: those lines
            become records of the ``"tritonserver.core"`` logger. The core's
            log settings are the process's, not one server's.
        log_info: Log the core's INFO lines (also on with ``log_verbose``).
        log_warn: Log the core's WARNING lines (also on with ``log_info``).
        log_error: Log the core's ERROR lines (also on with ``log_warn``).
        log_format: ``LogFormat.DEFAULT`` or ``LogFormat.ISO8601``: how the
            core stamps each line with its time.
        log_verbose: The core's verbose log level; 0 is off, higher levels
            log more.
        metrics: If true, the core collects the metrics ``Server.metrics()``
            returns.
        gpu_metrics: If true, metrics include GPU use and memory (only where
            a GPU is present).
        cpu_metrics: If true, metrics include the host's CPU and memory use.
        metrics_interval: Milliseconds between two collections of the GPU
            and CPU metrics.
        backend_directory: Where the core looks for backends (one folder per
            backend); left at its default and absent here, the folder of the
            Triton core in use. The package's own python backend is added
            beside them (see ``python_models``).
        repo_agent_directory: Where the core looks for repository agents;
            left at its default and absent here, the folder of the Triton
            core in use.
        model_load_device_limits: ``ModelLoadDeviceLimit(kind, device,
            fraction)`` entries: a model load is refused while the device's
            memory in use is above the fraction.
        backend_configuration: Settings for backends, by backend name, e.g.
            ``{"python": {"shm-default-byte-size": "1048576"}}``; the values
            are strings.
        host_policies: Host policies by policy name, e.g. ``{"gpu_0":
            {"numa-node": "0", "cpu-cores": "0-3"}}``; the values are strings.
        metrics_configuration: Metrics settings by group (``""`` for the
            settings of no group), e.g. ``{"": {"summary_latencies":
            "true"}}``; the values are strings.
        log_callback: A function called with ``(level, filename, line,
            message)`` for each line the core logs, instead of writing it
            anywhere (``LogLevel`` level; ``python_logging_callback`` hands
            them to ``logging``). Needs a core with a log callback (Triton
            2.72+); older cores raise UnsupportedError at start.
        python_models: How python-backend models run (this package's own
            option): ``"in-process"`` in this interpreter, ``"stub"`` in the
            core's stub processes, or ``"auto"``: in-process where the stub
            cannot run correctly here, else through the stub (user guide,
            "Python models").

    Example:
        >>> Options(model_repository="/models", model_control_mode=ModelControlMode.EXPLICIT)
    """

    model_repository: Union[str, list[str]] = field(default_factory=list)
    server_id: str = "triton"
    model_control_mode: ModelControlMode = ModelControlMode.NONE
    startup_models: list[str] = field(default_factory=list)
    strict_model_config: bool = False
    rate_limiter_mode: RateLimitMode = RateLimitMode.OFF
    rate_limiter_resources: list[RateLimiterResource] = field(default_factory=list)
    pinned_memory_pool_size: uint = 1 << 28
    cuda_memory_pool_sizes: dict[int, uint] = field(default_factory=dict)
    cache_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    cache_directory: str = DEFAULT_CACHE_DIRECTORY
    min_supported_compute_capability: float = 6.0
    exit_on_error: bool = True
    strict_readiness: bool = True
    exit_timeout: uint = 30
    buffer_manager_thread_count: uint = 0
    model_load_thread_count: uint = 4
    model_load_retry_count: uint = 0
    model_namespacing: bool = False
    enable_peer_access: bool = True
    log_file: Optional[str] = None
    log_info: bool = False
    log_warn: bool = False
    log_error: bool = False
    log_format: LogFormat = LogFormat.DEFAULT
    log_verbose: uint = 0
    metrics: bool = True
    gpu_metrics: bool = True
    cpu_metrics: bool = True
    metrics_interval: uint = 2000
    backend_directory: str = DEFAULT_BACKEND_DIRECTORY
    repo_agent_directory: str = DEFAULT_REPO_AGENT_DIRECTORY
    model_load_device_limits: list[ModelLoadDeviceLimit] = field(default_factory=list)
    backend_configuration: dict[str, dict[str, str]] = field(default_factory=dict)
    host_policies: dict[str, dict[str, str]] = field(default_factory=dict)
    metrics_configuration: dict[str, dict[str, str]] = field(default_factory=dict)
    log_callback: Optional[Callable[[Any, str, int, str], None]] = None
    python_models: PythonModelsMode = "auto"
    # Not fields; the options of `serve` (BinaryFlagOptions) differ: whether
    # each log level brings the ones above it (log_levels), and whether the
    # core writes log_file itself (serve writes it: _serve_log).
    _cascading_log_levels: ClassVar[bool] = True
    _core_writes_log_file: ClassVar[bool] = True


class BinaryFlagOptions(Options):
    """The options `python -m tritonserver serve` makes of NVIDIA's
    binary's flags: its log levels independent, as the binary's, and its
    log_file written by serve (the core's lines as the core wrote them,
    with the in-process models' lines: _serve_log)."""

    _cascading_log_levels: ClassVar[bool] = False
    _core_writes_log_file: ClassVar[bool] = False


class OptionsKwargs(TypedDict, total=False):
    """The fields of ``Options`` as keyword arguments (``Server(**kwargs)``),
    for type checkers: a misspelt option or a wrong type is reported in the
    caller's code. Kept equal to the fields of ``Options`` (a test checks)."""

    model_repository: Union[str, list[str]]
    server_id: str
    model_control_mode: ModelControlMode
    startup_models: list[str]
    strict_model_config: bool
    rate_limiter_mode: RateLimitMode
    rate_limiter_resources: list[RateLimiterResource]
    pinned_memory_pool_size: uint
    cuda_memory_pool_sizes: dict[int, uint]
    cache_config: dict[str, dict[str, Any]]
    cache_directory: str
    min_supported_compute_capability: float
    exit_on_error: bool
    strict_readiness: bool
    exit_timeout: uint
    buffer_manager_thread_count: uint
    model_load_thread_count: uint
    model_load_retry_count: uint
    model_namespacing: bool
    enable_peer_access: bool
    log_file: Optional[str]
    log_info: bool
    log_warn: bool
    log_error: bool
    log_format: LogFormat
    log_verbose: uint
    metrics: bool
    gpu_metrics: bool
    cpu_metrics: bool
    metrics_interval: uint
    backend_directory: str
    repo_agent_directory: str
    model_load_device_limits: list[ModelLoadDeviceLimit]
    backend_configuration: dict[str, dict[str, str]]
    host_policies: dict[str, dict[str, str]]
    metrics_configuration: dict[str, dict[str, str]]
    log_callback: Optional[Callable[[Any, str, int, str], None]]
    python_models: PythonModelsMode


# -- validation: the package's vocabulary (_checks.py), naming Options.<field>

def log_levels(o: Options) -> tuple[bool, bool, bool]:
    """The core's INFO, WARNING and ERROR lines on or off: as the options
    say, where each level brings the ones above it (log_verbose brings
    log_info, which brings log_warn, which brings log_error), as the
    official binding's Options do, without changing the caller's Options;
    each as given for options of NVIDIA's binary's flags (`serve`'s
    --log-info, --log-warning and --log-error are independent there)."""
    info, warn, error = _bool("log_info", o.log_info), _bool("log_warn", o.log_warn), _bool("log_error", o.log_error)
    if not o._cascading_log_levels:
        return info, warn, error
    info = info or _uint("log_verbose", o.log_verbose) > 0
    warn = warn or info
    return info, warn, error or warn


def _fail(name: str, expected: str, value: Any) -> NoReturn:
    checks.fail(f"Options.{name}", expected, value)


def _str(name: str, value: Any) -> str:
    return checks.text(f"Options.{name}", value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, int)):
        _fail(name, "a bool", value)
    return bool(value)


def _uint(name: str, value: Any) -> int:
    return checks.non_negative_int(f"Options.{name}", value)


def _exit_timeout(value: Any) -> int:
    """exit_timeout, at least 1 s: stop() waits that long for in-flight
    requests and for the models to unload, and unloading takes time even on
    an idle server, so 0 would make every stop() fail."""
    seconds = _uint("exit_timeout", value)
    if seconds == 0:
        raise ValueError(
            "Options.exit_timeout must be at least 1 second: stop() waits that long for "
            "in-flight requests and for the models to unload (which takes time even when "
            "the server is idle), so with 0 every stop() would fail with 'Exit timeout expired'"
        )
    return seconds


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(name, "a number", value)
    return float(value)


def _enum(name: str, enum: type, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(name, f"a {enum.__name__}", value)
    try:
        return int(enum(value))
    except ValueError:
        raise TypeError(f"Options.{name}: {value!r} is not a valid {enum.__name__}") from None


def _list(name: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        _fail(name, "a list", value)
    return list(value)


def _dict(name: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        _fail(name, "a dict", value)
    return dict(value)


def _nested_settings(name: str, value: Any) -> list[tuple[str, str, str]]:
    """dict[str, dict[str, str]] → (outer, setting, value) triples."""
    triples = []
    for outer, settings in _dict(name, value).items():
        for setting, setting_value in _dict(f"{name}[{outer!r}]", settings).items():
            triples.append((_str(name, outer), _str(name, setting), _str(name, str(setting_value))))
    return triples


def _resolve_directory(value: str, default: str, discovered: Optional[str]) -> str:
    if value == default and not os.path.isdir(value) and discovered and os.path.isdir(discovered):
        return discovered
    return value


def control_mode(options: Options) -> ModelControlMode:
    """The model control mode the core runs in: ``model_control_mode``, or
    EXPLICIT for a server without a model repository (it serves only what
    ``Server.load()`` and ``Server.bind()`` add, the only way models come to
    it; an empty folder of the package's is its repository)."""
    mode = ModelControlMode(_enum("model_control_mode", ModelControlMode, options.model_control_mode))
    if isinstance(options.model_repository, (list, tuple)) and not options.model_repository:
        return ModelControlMode.EXPLICIT
    return mode


_empty_repository_folder: Optional[str] = None


def _empty_repository() -> str:
    """An empty folder, the model repository of servers given none (made
    once per process, removed at exit; nothing ever writes to it)."""
    global _empty_repository_folder
    if _empty_repository_folder is None or not os.path.isdir(_empty_repository_folder):
        import atexit
        import shutil
        import tempfile

        _empty_repository_folder = tempfile.mkdtemp(prefix="tritonserver-no-repository-")
        atexit.register(shutil.rmtree, _empty_repository_folder, True)
    return _empty_repository_folder


def build_core_options(options: Options) -> tuple["_native.ServerOptions", PythonModels]:
    """Validate `options`, load the Triton core, and make its server
    options; also how python-backend models will run."""
    o = options
    if o.python_models not in PYTHON_MODELS_MODES:
        raise TypeError(f"Options.python_models must be one of {', '.join(map(repr, PYTHON_MODELS_MODES))}, "
                        f"not {o.python_models!r}")
    server_id = _str("server_id", o.server_id)
    if o.model_repository is None:
        raise InvalidArgumentError("Model repository must be specified.")
    repositories = [o.model_repository] if isinstance(o.model_repository, str) else _list(
        "model_repository", o.model_repository)
    repositories = [_str("model_repository", r) for r in repositories] or [_empty_repository()]
    mode = int(control_mode(o))
    startup_models = [_str("startup_models", m) for m in _list("startup_models", o.startup_models)]
    resources = []
    for r in _list("rate_limiter_resources", o.rate_limiter_resources):
        if not isinstance(r, RateLimiterResource):
            _fail("rate_limiter_resources", "a list of RateLimiterResource", r)
        resources.append((_str("rate_limiter_resources", r.name),
                          _uint("rate_limiter_resources", r.count),
                          _uint("rate_limiter_resources", r.device)))
    pools = [(_uint("cuda_memory_pool_sizes", d), _uint("cuda_memory_pool_sizes", s))
             for d, s in _dict("cuda_memory_pool_sizes", o.cuda_memory_pool_sizes).items()]
    caches = []
    for cache_name, settings in _dict("cache_config", o.cache_config).items():
        caches.append((_str("cache_config", cache_name), json.dumps(_dict("cache_config", settings))))
    limits = []
    for limit in _list("model_load_device_limits", o.model_load_device_limits):
        if not isinstance(limit, ModelLoadDeviceLimit):
            _fail("model_load_device_limits", "a list of ModelLoadDeviceLimit", limit)
        limits.append((_enum("model_load_device_limits", InstanceGroupKind, limit.kind),
                       _uint("model_load_device_limits", limit.device),
                       _number("model_load_device_limits", limit.fraction)))
    if o.log_file is not None:
        _str("log_file", o.log_file)
    if o.log_callback is not None and not callable(o.log_callback):
        _fail("log_callback", "callable", o.log_callback)
    verbose = _uint("log_verbose", o.log_verbose)
    log_info, log_warn, log_error = log_levels(o)
    host_policies = _nested_settings("host_policies", o.host_policies)
    metrics_config = _nested_settings("metrics_configuration", o.metrics_configuration)
    backend_config = _nested_settings("backend_configuration", o.backend_configuration)
    for name in ("cache_directory", "backend_directory", "repo_agent_directory"):
        _str(name, getattr(o, name))

    install = _triton_core.load_core()
    if install.python_backend is not None:
        _triton_core.prepare_stub_environment(install)
    python_models = choose_python_models(o.python_models, install)
    backend_directory = o.backend_directory
    default_absent = backend_directory == DEFAULT_BACKEND_DIRECTORY and not os.path.isdir(backend_directory)
    if python_models.in_process:
        announce_python_models(python_models, o.python_models)
        base: Optional[str] = None if default_absent else backend_directory
    elif default_absent:
        base = _triton_core.python_backend_directory(install) or _resolve_directory(
            backend_directory, DEFAULT_BACKEND_DIRECTORY, install.backend_directory)
    else:
        base = backend_directory
    # The given backends as links, with the package's own library beside
    # them (Server.bind's models; the python backend too when in-process).
    backend_directory = package_backend_directory(base, python_models.in_process)
    _logging.package_log(_logging.DEBUG, "backend directory: %s", backend_directory)

    c = _native.ServerOptions()
    c.set_server_id(server_id)
    for repository in repositories:
        c.set_model_repository(repository)
    c.set_model_control_mode(mode)
    for model in startup_models:
        c.set_startup_model(model)
    c.set_strict_model_config(_bool("strict_model_config", o.strict_model_config))
    c.set_rate_limiter_mode(_enum("rate_limiter_mode", RateLimitMode, o.rate_limiter_mode))
    for name, count, device in resources:
        c.set_rate_limiter_resource(name, count, device)
    c.set_pinned_memory_pool_size(_uint("pinned_memory_pool_size", o.pinned_memory_pool_size))
    for device, size in pools:
        c.set_cuda_memory_pool_size(device, size)
    for cache_name, config in caches:
        c.set_cache_config(cache_name, config)
    c.set_cache_directory(_resolve_directory(
        o.cache_directory, DEFAULT_CACHE_DIRECTORY, install.cache_directory))
    c.set_min_supported_compute_capability(
        _number("min_supported_compute_capability", o.min_supported_compute_capability))
    # The core never exits on error: Server.start() refuses the start itself
    # (Server._failed_init), so that it stops the server once the core's
    # threads are idle; the core's own stop there can crash it.
    _bool("exit_on_error", o.exit_on_error)
    c.set_exit_on_error(False)
    c.set_strict_readiness(_bool("strict_readiness", o.strict_readiness))
    c.set_exit_timeout(_exit_timeout(o.exit_timeout))
    c.set_buffer_manager_thread_count(_uint("buffer_manager_thread_count", o.buffer_manager_thread_count))
    c.set_model_load_thread_count(_uint("model_load_thread_count", o.model_load_thread_count))
    c.set_model_load_retry_count(_uint("model_load_retry_count", o.model_load_retry_count))
    c.set_model_namespacing(_bool("model_namespacing", o.model_namespacing))
    c.set_enable_peer_access(_bool("enable_peer_access", o.enable_peer_access))
    # The core always logs its ERROR lines, so that start() and load() can
    # name the cause of a model that failed to load (_logging.core_errors);
    # only the levels asked for reach a logger, file or callback.
    routed = _logging.routed_levels(verbose > 0, log_info, log_warn, log_error)
    _logging.route_core_lines(routed, gpu=_native.cuda_device_count() > 0)
    core_errors = True
    if o.log_callback is not None:
        destination = "callback"
    elif o.log_file and log_error and o._core_writes_log_file:
        c.set_log_file(o.log_file)
        destination = f"file:{o.log_file}"
    else:
        # The core's log lines become records of the "tritonserver.core"
        # logger (a log_file with every level off is not written).
        pipe = _logging.core_log_pipe()
        if pipe is not None:
            c.set_log_file(pipe)
            destination = "pipe"
        else:  # stderr: only the lines asked for
            destination, core_errors = "stderr", log_error
    _logging.set_destination(destination)
    c.set_log_info(log_info)
    c.set_log_warn(log_warn)
    c.set_log_error(core_errors)
    c.set_log_format(_enum("log_format", LogFormat, o.log_format))
    c.set_log_verbose(verbose)
    c.set_metrics(_bool("metrics", o.metrics))
    # GPU metrics need a GPU: without one the core only prints an NVML error.
    c.set_gpu_metrics(_bool("gpu_metrics", o.gpu_metrics) and _native.cuda_device_count() > 0)
    c.set_cpu_metrics(_bool("cpu_metrics", o.cpu_metrics))
    c.set_metrics_interval(_uint("metrics_interval", o.metrics_interval))
    c.set_backend_directory(backend_directory)
    c.set_repo_agent_directory(_resolve_directory(
        o.repo_agent_directory, DEFAULT_REPO_AGENT_DIRECTORY, install.repo_agent_directory))
    for kind, device, fraction in limits:
        c.set_model_load_device_limit(kind, device, fraction)
    for policy, setting, value in host_policies:
        c.set_host_policy(policy, setting, value)
    for name, setting, value in metrics_config:
        c.set_metrics_config(name, setting, value)
    for backend, setting, value in backend_config:
        c.set_backend_config(backend, setting, value)
    if o.log_callback is not None:
        callback = o.log_callback
        c.set_log_callback(_logging.collecting_callback(
            lambda level, file, line, msg: callback(LogLevel(level), file, line, msg), routed))
    return c, python_models
