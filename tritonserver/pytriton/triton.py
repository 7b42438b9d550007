"""PyTriton's server side (``pytriton.triton``): `Triton`, `TritonConfig`,
`TritonSecurityConfig`, run on this package's embedded server.

`Triton` starts a `tritonserver.Server` in this process (no tritonserver
subprocess, no proxy model, no sockets between them); each ``bind()`` serves
an inference callable as a model run in-process (``Server.bind``'s
machinery, called with PyTriton's conventions by tritonserver/pytriton/
_runtime.py). The HTTP, gRPC and metrics endpoints are this package's
frontends (``tritonserver.frontend``); `TritonConfig`'s fields are the
tritonserver binary's flags, as PyTriton passes them to it, and they mean
here what they mean to ``python -m tritonserver serve``. A field this package
cannot honour is refused with PyTritonValidationError naming it."""

from __future__ import annotations

import atexit
import contextlib
import copy
import dataclasses
import io
import itertools
import logging
import os
import pathlib
import re
import secrets
import shutil
import tempfile
import threading
import typing
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .._api._bind import TensorSpec, bind as _bind_model
from .._api._errors import TritonError
from .._api._server import Server
from .._serve_flags import _REFUSED, settings as _serve_settings
from ._runtime import Runtime
from .decorators import TritonContext, inject_triton_context
from .exceptions import (PyTritonBadParameterError, PyTritonInvalidOperationError, PyTritonRuntimeError,
                         PyTritonValidationError)
from .model_config import ModelConfig, Tensor
from .model_config.generator import is_bytes_dtype, model_config_json, triton_model_config

LOGGER = logging.getLogger("tritonserver.pytriton")
MONITORING_PERIOD_S = 10.0
TRITON_ACCESS_HEADER = "triton-access" + "-token"
VALID_TRITON_ENDPOINTS = {"health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
                          "statistics", "trace", "logging"}
DEFAULT_PROTECTED_ENDPOINTS = ["shared-memory", "model-repository", "statistics", "trace", "logging"]
_ENV_PREFIX = "PYTRITON_TRITON_CONFIG_"


@dataclasses.dataclass(kw_only=True)
class TritonConfig:
    """The server's settings: the tritonserver binary's flags (each field is
    ``--<field with dashes>``), None for the binary's default. The HTTP,
    gRPC and metrics fields configure this package's frontends; the
    SageMaker, Vertex AI and trace fields are refused (not served here).
    ``http_transport`` is this package's (``--http-transport``: "uvicorn"
    or "native"; None for KServeHttp.Options' default). Unlike PyTriton, ``allow_http=False, allow_grpc=False`` is allowed: the
    models are then served to in-process clients only
    (``ModelClient("inprocess://", ...)``)."""

    model_repository: Optional[pathlib.Path] = None
    id: Optional[str] = None
    log_verbose: Optional[int] = None
    log_file: Optional[pathlib.Path] = None
    exit_timeout_secs: Optional[int] = None
    exit_on_error: Optional[bool] = None
    strict_readiness: Optional[bool] = None
    allow_http: Optional[bool] = None
    http_address: Optional[str] = None
    http_port: Optional[int] = None
    http_header_forward_pattern: Optional[str] = None
    http_thread_count: Optional[int] = None
    http_restricted_api: Optional[str] = None
    http_transport: Optional[str] = None
    allow_grpc: Optional[bool] = None
    grpc_address: Optional[str] = None
    grpc_port: Optional[int] = None
    grpc_header_forward_pattern: Optional[str] = None
    grpc_infer_allocation_pool_size: Optional[int] = None
    grpc_use_ssl: Optional[bool] = None
    grpc_use_ssl_mutual: Optional[bool] = None
    grpc_server_cert: Optional[pathlib.Path] = None
    grpc_server_key: Optional[pathlib.Path] = None
    grpc_root_cert: Optional[pathlib.Path] = None
    grpc_infer_response_compression_level: Optional[str] = None
    grpc_keepalive_time: Optional[int] = None
    grpc_keepalive_timeout: Optional[int] = None
    grpc_keepalive_permit_without_calls: Optional[bool] = None
    grpc_http2_max_pings_without_data: Optional[int] = None
    grpc_http2_min_recv_ping_interval_without_data: Optional[int] = None
    grpc_http2_max_ping_strikes: Optional[int] = None
    grpc_restricted_protocol: Optional[str] = None
    allow_metrics: Optional[bool] = None
    allow_gpu_metrics: Optional[bool] = None
    allow_cpu_metrics: Optional[bool] = None
    metrics_interval_ms: Optional[int] = None
    metrics_port: Optional[int] = None
    metrics_address: Optional[str] = None
    allow_sagemaker: Optional[bool] = None
    sagemaker_port: Optional[int] = None
    sagemaker_safe_port_range: Optional[str] = None
    sagemaker_thread_count: Optional[int] = None
    allow_vertex_ai: Optional[bool] = None
    vertex_ai_port: Optional[int] = None
    vertex_ai_thread_count: Optional[int] = None
    vertex_ai_default_model: Optional[str] = None
    metrics_config: Optional[List[str]] = None
    trace_config: Optional[List[str]] = None
    cache_config: Optional[List[str]] = None
    cache_directory: Optional[str] = None
    buffer_manager_thread_count: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, config: Dict[str, Any]) -> "TritonConfig":
        """A TritonConfig of `config`'s values converted to the fields'
        types (unknown names are logged and ignored, as PyTriton does)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name, value in config.items():
            if name not in fields:
                LOGGER.warning("Ignoring %s=%s as could not find matching config field. Available fields: %s",
                               name, value, ", ".join(fields))
        hints = typing.get_type_hints(cls)

        def cast(name: str, value: Any) -> Any:
            if value is None:
                return None
            kind = hints[name]
            args = [a for a in typing.get_args(kind) if a is not type(None)]
            kind = args[0] if args else kind
            if typing.get_origin(kind) is list:
                return value.split(",") if isinstance(value, str) else list(value)
            if kind is bool and isinstance(value, str):
                return value.strip().lower() in ("1", "true", "yes", "on")
            return kind(value)

        return cls(**{name: cast(name, value) for name, value in config.items() if name in fields})

    @classmethod
    def from_env(cls) -> "TritonConfig":
        """A TritonConfig of the ``PYTRITON_TRITON_CONFIG_<FIELD>``
        environment variables (``..._<FIELD>_<n>`` for the n-th item of a
        list field)."""
        config: Dict[str, Any] = {}
        indexed = re.compile(r"^(.+?)_(\d+)$")
        for name, value in os.environ.items():
            if not name.startswith(_ENV_PREFIX):
                continue
            key = name[len(_ENV_PREFIX):].lower()
            match = indexed.match(key)
            if match:
                items = config.setdefault(match.group(1), {})
                items[int(match.group(2))] = value
            else:
                config[key] = value
        for key, value in list(config.items()):
            if isinstance(value, dict):
                config[key] = [value[i] for i in sorted(value)]
        return cls.from_dict(config)


@dataclasses.dataclass
class TritonLifecyclePolicy:
    """PyTriton's lifecycle policy: only the default (start on entering the
    context, models loaded by name) applies here."""

    launch_triton_on_startup: bool = True
    local_model_store: bool = False


DefaultTritonLifecyclePolicy = TritonLifecyclePolicy()


@dataclasses.dataclass
class TritonSecurityConfig:
    """Token-based restriction of endpoints (the binary's restricted APIs):
    requests to ``restricted_endpoints`` (None: shared-memory,
    model-repository, statistics, trace, logging; []: none) need the header
    ``triton-access-token: <access_token>`` (generated when None)."""

    access_token: Optional[str] = None
    restricted_endpoints: Optional[List[str]] = None

    def __post_init__(self) -> None:
        if self.restricted_endpoints is None:
            self.restricted_endpoints = list(DEFAULT_PROTECTED_ENDPOINTS)
        self._validate_endpoint_names(self.restricted_endpoints)
        if self.access_token is None and self.restricted_endpoints:
            self.access_token = secrets.token_urlsafe(32)

    @staticmethod
    def _validate_endpoint_names(endpoints: List[str]) -> None:
        """PyTritonValidationError naming the endpoints Triton does not have."""
        invalid = set(endpoints) - VALID_TRITON_ENDPOINTS
        if invalid:
            raise PyTritonValidationError(f"Invalid endpoint names: {', '.join(sorted(invalid))}. Valid endpoints "
                                          f"are: {', '.join(sorted(VALID_TRITON_ENDPOINTS))}")


# Running Triton objects of this process, by id (the in-process client finds them here).
_running: "weakref.WeakValueDictionary[str, Triton]" = weakref.WeakValueDictionary()
_running_lock = threading.Lock()


def running_triton(triton_id: str = "") -> Optional["Triton"]:
    """The running Triton of this process with id `triton_id` ("": the only
    one), None while there is none; PyTritonInvalidOperationError when
    `triton_id` is "" and several run."""
    with _running_lock:
        found = dict(_running)
    if triton_id:
        return found.get(triton_id)
    if len(found) > 1:
        raise PyTritonInvalidOperationError(
            f"Several Triton objects run in this process ({sorted(found)}): name one in the url, "
            "inprocess://<TritonConfig.id>")
    return next(iter(found.values()), None)


def _flags(config: TritonConfig, security: TritonSecurityConfig, repository: str) -> List[str]:
    """The binary's flags of `config`, as PyTriton passes them."""
    argv = []
    for name, value in config.to_dict().items():
        if value is None or name == "model_repository":
            continue
        flag = "--" + name.replace("_", "-")
        if flag in _REFUSED and value not in (False, None):
            raise PyTritonValidationError(f"TritonConfig.{name}: {_REFUSED[flag]}")
        for item in (value if isinstance(value, list) else [value]):
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            argv.append(f"{flag}={text}")
    argv += [f"--model-repository={config.model_repository or repository}", "--model-control-mode=explicit",
             "--load-model=*"]
    if security.access_token and security.restricted_endpoints:
        restriction = f"{','.join(security.restricted_endpoints)}:{TRITON_ACCESS_HEADER}={security.access_token}"
        if config.http_restricted_api is None:
            argv.append(f"--http-restricted-api={restriction}")
        if config.grpc_restricted_protocol is None:
            argv.append(f"--grpc-restricted-protocol={restriction}")
    return argv


def _serve_settings_of(argv: List[str]) -> Any:
    """The Server's and frontends' settings of the flags; PyTritonValidationError
    naming the TritonConfig field of a bad value."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return _serve_settings(argv)
    except SystemExit:
        message = errors.getvalue().strip().splitlines()[-1] if errors.getvalue().strip() else "invalid value"
        message = message.split("error: ", 1)[-1]
        match = re.search(r"--([a-z0-9-]+)", message)
        field = f"TritonConfig.{match.group(1).replace('-', '_')}" if match else "TritonConfig"
        raise PyTritonValidationError(f"{field}: {message}") from None


class _BoundModel:
    """A model bind() was given: loaded when the server runs."""

    def __init__(self, triton: "Triton", model_name: str, infer_functions: List[Callable[..., Any]],
                 inputs: Sequence[Tensor], outputs: Sequence[Tensor], config: ModelConfig, strict: bool) -> None:
        self.model_name = model_name
        self.infer_functions = infer_functions
        self.config = config
        self.strict = strict
        self.triton_config = triton_model_config(model_name, config, inputs, outputs, len(infer_functions))
        self.json = model_config_json(self.triton_config)  # checks shapes and dtypes now
        self._triton = weakref.ref(triton)
        self._next = itertools.count()
        for infer_function in infer_functions:
            triton._triton_context.model_configs[infer_function] = copy.deepcopy(self.triton_config)
            inject_triton_context(triton._triton_context, infer_function)

    def runtime(self, _binding: Any, _args: Dict[str, str]) -> Runtime:
        """A model instance's runtime: the instances take the callables in turn."""
        infer_function = self.infer_functions[next(self._next) % len(self.infer_functions)]
        return Runtime(infer_function, self.triton_config, self.strict, self._unrecoverable)

    def _unrecoverable(self, _message: str) -> None:
        triton = self._triton()
        if triton is not None:
            threading.Thread(target=triton.stop, name="pytriton-stop", daemon=True).start()

    def load(self, server: Server) -> None:
        specs = self.triton_config
        _bind_model(
            server, self.model_name, self.infer_functions[0],
            inputs=[TensorSpec(s.name, bytes if is_bytes_dtype(s.dtype) else s.dtype, tuple(s.shape))
                    for s in specs.inputs or ()],
            outputs=[TensorSpec(s.name, bytes if is_bytes_dtype(s.dtype) else s.dtype, tuple(s.shape))
                     for s in specs.outputs or ()],
            max_batch_size=specs.max_batch_size, dynamic_batching=False, instances=len(self.infer_functions),
            decoupled=specs.decoupled, config=self.json, runtime=self.runtime)


class Triton:
    """A Triton Inference Server in this process serving bound Python
    inference callables: ``with Triton(config=TritonConfig(...)) as
    triton: triton.bind(...); triton.serve()``."""

    def __init__(self, *, config: Optional[TritonConfig] = None,
                 workspace: Union[str, pathlib.Path, None] = None,
                 triton_lifecycle_policy: Optional[TritonLifecyclePolicy] = None,
                 security_config: Optional[TritonSecurityConfig] = None) -> None:
        if triton_lifecycle_policy not in (None, DefaultTritonLifecyclePolicy, TritonLifecyclePolicy()):
            raise PyTritonValidationError(
                "Triton(triton_lifecycle_policy=...): only the default policy applies here (the server starts on "
                "entering the context and loads bound models by name); Vertex AI's policy is not supported")

        def given(values: Dict[str, Any]) -> Dict[str, Any]:
            return {name: value for name, value in values.items() if value is not None}

        merged = {**given(TritonConfig.from_env().to_dict()), **given(config.to_dict() if config else {})}
        self._config = TritonConfig(**merged)
        self._security_config = security_config or TritonSecurityConfig()
        # the model repository folder the server starts with: made by run(), removed by stop() when made here
        self._workspace_given = pathlib.Path(workspace) if workspace is not None else None
        self._workspace: Optional[pathlib.Path] = None
        # the flags checked now, as PyTriton checks its config when made
        self._settings = _serve_settings_of(_flags(self._config, self._security_config, "<workspace>"))
        self._triton_context = TritonContext()
        self._models: Dict[str, _BoundModel] = {}
        self._server: Optional[Server] = None
        self._frontends: List[Any] = []
        self._cv = threading.Condition()
        self._stopped = True
        self._connected = False
        self._id = self._config.id or f"triton-{id(self):x}"

    # -- models -----------------------------------------------------------------------------
    def bind(self, model_name: str, infer_func: Union[Callable[..., Any], Sequence[Callable[..., Any]]],
             inputs: Sequence[Tensor], outputs: Sequence[Tensor], model_version: int = 1,
             config: Optional[ModelConfig] = None, strict: bool = False,
             trace_config: Optional[List[str]] = None) -> None:
        """Serve `infer_func` (a list of callables: one model instance each)
        as model `model_name`; loaded now if the server runs, else when it
        starts."""
        if not model_name:
            raise PyTritonValidationError("Model name cannot be empty")
        if not re.match(r"^[a-zA-Z0-9._-]+$", model_name):
            raise PyTritonValidationError(
                "Model name can only contain alphanumeric characters, dots, underscores and dashes")
        if model_version != 1:
            raise PyTritonBadParameterError(
                f"Model '{model_name}': model_version={model_version}: a bound model has version 1 only here; "
                "bind each version under a model name of its own")
        if trace_config is not None or self._config.trace_config is not None:
            raise PyTritonBadParameterError(f"Model '{model_name}': trace_config: {_REFUSED['--trace-config']}")
        functions = [infer_func] if callable(infer_func) else list(infer_func)
        if not functions or not all(callable(f) for f in functions):
            raise PyTritonBadParameterError(f"Model '{model_name}': infer_func must be a callable or a non-empty "
                                            "list of callables (one per model instance)")
        model = _BoundModel(self, model_name, functions, inputs, outputs, config or ModelConfig(), strict)
        if self.is_connected() and self._server is not None:
            self._load(model)  # a model that fails to load is not bound
        self._models[model_name] = model

    def _load(self, model: _BoundModel) -> None:
        assert self._server is not None
        try:
            model.load(self._server)
        except TritonError as e:
            raise PyTritonRuntimeError(f"Model '{model.model_name}' could not be loaded: {e}") from e
        LOGGER.info("Infer function available as model: `/v2/models/%s`", model.model_name)

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> "Triton":
        self.run()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def run(self) -> None:
        """Start the server (and its frontends) and load the bound models;
        if a model fails to load, the server stops and the error is raised."""
        self._run_server()
        try:
            self.connect()
        except BaseException:
            self.stop()
            raise

    def _run_server(self) -> None:
        with self._cv:
            if self._server is not None:
                return
            options = dict(self._settings.server)
            if self._config.model_repository is None:
                if self._workspace_given is not None:
                    self._workspace_given.mkdir(parents=True, exist_ok=True)
                    self._workspace = self._workspace_given
                else:
                    self._workspace = pathlib.Path(tempfile.mkdtemp(prefix="pytriton-"))
                options["model_repository"] = [str(self._workspace)]
            server = Server(**options)
            try:
                server.start(wait_until_ready=True)
                self._server = server
                self._stopped = False
                self._start_frontends(server)
            except BaseException:
                self._stop_frontends()
                self._server = None
                self._stopped = True
                with contextlib.suppress(TritonError):  # a server that did not start has nothing to stop
                    server.stop()
                self._remove_workspace()
                raise
            atexit.register(self.stop)
            with _running_lock:
                _running[self._id] = self

    def _start_frontends(self, server: Server) -> None:
        for label, kind, options in (("HTTP", "KServeHttp", self._settings.http),
                                     ("gRPC", "KServeGrpc", self._settings.grpc),
                                     ("metrics", "Metrics", self._settings.metrics)):
            if options is None:
                continue
            try:
                from .. import frontend
                cls = getattr(frontend, kind)
                made = cls(server, cls.Options(**options))
                made.start()
            except (ImportError, AttributeError) as e:
                raise PyTritonRuntimeError(
                    f"Triton: serving {label} (TritonConfig.allow_{kind.lower().replace('kserve', '')} is on by "
                    f"default) needs tritonserver.frontend.{kind}, which cannot run here ({e}); install the "
                    "serve extra (pip install \"tritonserver-binding[serve]\"), or set "
                    "TritonConfig(allow_http=False, allow_grpc=False, allow_metrics=False) to serve in-process "
                    "clients only (ModelClient(\"inprocess://\", model_name))") from None
            except TritonError as e:
                raise PyTritonRuntimeError(f"Triton: the {label} endpoint could not start: {e}") from e
            self._frontends.append(made)
            LOGGER.info("Started %s endpoint at %s:%s", label, made.options.address, made.port)

    def _stop_frontends(self) -> None:
        while self._frontends:
            frontend = self._frontends.pop()
            try:
                frontend.stop()
            except TritonError as e:
                LOGGER.warning("Stopping a frontend: %s", e)

    def connect(self) -> None:
        """Load the bound models (the server must run: see run())."""
        with self._cv:
            if self._connected:
                return
            if self._server is None:
                raise PyTritonInvalidOperationError("Triton.connect(): the server is not running; call run() or "
                                                    "enter the context first")
            for model in self._models.values():
                self._load(model)
            self._connected = True

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """Run the server and block until stop() (from another thread, or an
        inference callable's PyTritonUnrecoverableError) or SIGINT (Ctrl+C),
        then stop."""
        self.run()
        LOGGER.info("(Press CTRL+C or use the command `kill -SIGINT %d` to send a SIGINT signal and quit)",
                    os.getpid())
        with self._cv:
            try:
                while self.is_alive():
                    self._cv.wait(timeout=monitoring_period_s)
            except KeyboardInterrupt:
                LOGGER.info("SIGINT received, exiting.")
        self.stop()

    def stop(self) -> bool:
        """Stop the frontends and the server, unload the models and remove
        the workspace; False when it was not running."""
        with self._cv:
            if self._stopped:
                return False
            self._stopped = True
            self._connected = False
            server, self._server = self._server, None
            atexit.unregister(self.stop)
            with _running_lock:
                if _running.get(self._id) is self:
                    del _running[self._id]
            self._stop_frontends()
            self._cv.notify_all()
        if server is not None:
            server.stop()
        self._remove_workspace()
        return True

    def _remove_workspace(self) -> None:
        if self._workspace is not None and self._workspace_given is None:
            shutil.rmtree(self._workspace, ignore_errors=True)
        self._workspace = None

    def is_alive(self) -> bool:
        """Whether the server is live and every bound model ready."""
        server = self._server
        if server is None or self._stopped:
            return False
        try:
            return server.live() and all(server.model(name).ready() for name in self._models)
        except TritonError:
            return False

    def is_connected(self) -> bool:
        """Whether the server runs with the bound models loaded."""
        return self._connected  # one read (the in-process clients ask on every request): no lock needed

    def get_access_token(self) -> Optional[str]:
        """The token of the restricted endpoints (TritonSecurityConfig)."""
        return self._security_config.access_token

    # -- this package's additions -----------------------------------------------------------
    @property
    def server(self) -> Server:
        """The running tritonserver.Server (its models, statistics, metrics)."""
        if self._server is None:
            raise PyTritonInvalidOperationError("Triton.server: the server is not running")
        return self._server

    @property
    def frontends(self) -> List[Any]:
        """The started frontends (each with ``.port``, the port it listens on)."""
        return list(self._frontends)


class RemoteTriton:
    """PyTriton's RemoteTriton attaches proxy models to a tritonserver
    process elsewhere; nothing of that applies to an in-process server."""

    def __init__(self, url: str, *args: Any, **kwargs: Any) -> None:
        raise PyTritonInvalidOperationError(
            f"RemoteTriton({url!r}) is not supported by tritonserver.pytriton: it binds Python functions to a "
            "tritonserver process through PyTriton's proxy models; run the functions in this process with "
            "Triton() instead, or serve them with `python -m tritonserver serve`")
