"""The in-process server: lifecycle, model repository control, metadata and
metrics."""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Callable, NoReturn, Optional, Union

from .. import _native
from . import (_bind, _core_threads, _grpc_fork_support, _interruptible, _logging, _model_failures, _stopping,
               _triton_core)
from ._bind import TensorSpec
from ._enums import MetricFormat, ModelControlMode, ModelIndexFlag
from ._errors import (
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnsupportedError,
    advised,
    error_from_code,
)
from ._model import Model, _json_object
from ._options import Options, OptionsKwargs, build_core_options, control_mode
from ._checks import text as _text
from ._python_backend_layout import PythonModels
from ._typing import Unpack

# How long a failed start waits for the core's threads to be idle before it
# stops the core server (_core_threads says why).
IDLE_WAIT_S = 2.0


class ModelDictionary(dict[tuple[str, int], Model]):
    """Models of a server keyed by (name, version); indexing by name alone
    gives that model at version -1 (the server's choice), as officially."""

    def __init__(self, server: "Server", models: list[Model]) -> None:
        super().__init__({(m.name, m.version): m for m in models})
        self._server = server
        self._model_names = [m.name for m in models]

    def __getitem__(self, key: Union[str, tuple[str, int]]) -> Model:
        if isinstance(key, tuple):
            try:
                model: Model = super().__getitem__(key)
                return model
            except KeyError:
                raise KeyError(f"Unknown Model: {key}") from None
        if key in self._model_names:
            return Model(self._server, name=key, version=-1)
        raise KeyError(f"Unknown Model: {key}")


class Server:
    """An in-process Triton Inference Server, made from an ``Options`` or
    from its fields as keyword arguments (described in ``Options``), not
    both; ``start()`` starts it.

    Example:
        >>> with Server(model_repository="models") as server:
        ...     server.model("add_sub").infer(inputs={...})
    """

    _UNLOADED_STATES = (None, "UNAVAILABLE")

    def __init__(self, options: Optional[Options] = None, **kwargs: Unpack[OptionsKwargs]) -> None:
        if options is None:
            options = Options(**kwargs)
        elif not isinstance(options, Options):
            hint = f"Server(model_repository={options!r})" if isinstance(options, (str, list)) else (
                "Server(model_repository=...)")
            raise TypeError(
                f"Server() takes an Options object or keyword arguments, not "
                f"{type(options).__name__}: write {hint}"
            )
        elif kwargs:
            raise TypeError(
                f"Server() takes an Options object or keyword arguments, not both "
                f"(got Options and {', '.join(sorted(kwargs))}): set them on the Options, "
                "e.g. dataclasses.replace(options, ...)"
            )
        self.options = options
        self._server: Optional[_native.Server] = None
        # Set by stop() (until the next successful start()): a stopped
        # server answers ready()/live() with False and a further stop() is a
        # no-op, while one never started raises "Server not started".
        self._stopped = False
        # Set when the interpreter's exit stopped it (_stop_running_servers).
        self._stopped_at_exit = False
        # Repositories added by register_model_repository() to the running
        # core server (named by load()'s "not found" error).
        self._registered_repositories: list[str] = []
        self._python_models: Optional[PythonModels] = None
        # Serializes load() and unload(): see load().
        self._model_control = threading.Lock()
        # Set while a start() is creating the core server: a concurrent
        # start() is refused like a second one.
        self._starting = False
        self._start_lock = threading.Lock()
        # The model control mode the core runs in (EXPLICIT without a
        # model repository), and the models the core's log said failed to
        # load (at start, or by the last load() of each).
        self._control_mode = ModelControlMode.NONE
        self._load_failures: list[_model_failures.Failure] = []

    # -- lifecycle -----------------------------------------------------------
    def start(
        self,
        wait_until_ready: bool = False,
        polling_interval: float = 0.1,
        timeout: Optional[float] = None,
    ) -> "Server":
        """Start the server (loads the Triton core on first use); returns self.

        The core loads the models of the repository (NONE and POLL modes)
        or ``startup_models`` (EXPLICIT) before start() returns. With
        ``exit_on_error`` (the default) a model that fails to load fails the
        start: InternalError naming each such model with the core's reason.
        A server that cannot initialize at all (a model repository that does
        not exist, say) fails the start with the core's reason whatever
        ``exit_on_error`` says.

        With ``wait_until_ready`` it polls ``ready()`` until true or until
        ``timeout`` seconds pass (UnavailableError; the server is stopped
        again, so start() may be retried). A model that failed to load at
        start (``exit_on_error=False``) keeps a server with
        ``strict_readiness`` from ever becoming ready, as the core does not
        retry it: then start() raises UnavailableError at once, naming each
        such model with the core's reason, and stops the server.
        """
        with self._start_lock:
            if self._server is not None or self._starting:
                raise InvalidArgumentError(
                    "Server already started" if self._server is not None
                    else "Server already started (another thread is starting it)"
                )
            self._starting = True
        try:
            core_options, self._python_models = build_core_options(self.options)
            if not self._python_models.in_process:
                _grpc_fork_support.warn_if_on()
            self._control_mode = control_mode(self.options)
            _start_state_maker()  # before the core's threads run python models
            refusal: Optional[TritonError] = None
            with _logging.core_errors() as logged:
                try:
                    self._server = _native.Server(core_options)
                except TritonError as e:
                    refusal = e
            failed_init = refusal is None and self._failed_init(logged)
            if failed_init:
                refusal = failed_init
            self._load_failures, others = _model_failures.from_log(logged)
            if refusal is not None:
                raise self._failed_start(refusal, others) from (None if failed_init else refusal)
            self._stopped = False
            self._registered_repositories = []
        finally:
            self._starting = False
        _stopped_addresses.discard(self._ptr())  # a new core server at a stopped one's address
        _running.add(self)
        _start_releaser()
        try:
            # Models loaded at start (POLL/NONE mode, startup_models).
            self._refuse_unusable_python_models(None)
        except UnsupportedError:
            self.stop()
            raise
        if wait_until_ready:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self.ready():
                self._refuse_never_ready()
                if deadline is not None and time.monotonic() >= deadline:
                    self.stop()
                    raise UnavailableError("Timeout before ready")
                time.sleep(polling_interval)
        return self

    def _failed_init(self, logged: list[str]) -> Optional[TritonError]:
        """The refusal of a start that the core logged instead of returning
        (it is told not to exit on error: see build_core_options), taken out
        of `logged`: a server that could not initialize, or models that
        failed to load with ``exit_on_error``. The core server is then
        stopped, once the core's threads are idle (_core_threads says why)."""
        server = self._server
        assert server is not None
        status = _model_failures.take_start_status(logged, live=server.is_live())
        if status is None or (status[1] == _model_failures.LOAD_FAILED and not self.options.exit_on_error):
            return None
        self._server = None
        _core_threads.wait_until_idle(IDLE_WAIT_S)
        try:
            _stopping.stop(server, float(self.options.exit_timeout), announced=False, interrupted=False)
        except TritonError:
            pass  # the refusal is what the caller needs; the stop went on in the background
        return error_from_code(*status)

    def _failed_start(self, error: TritonError, others: list[str]) -> TritonError:
        """The core's refusal of a start, with the models that failed to
        load and the core's reason for each (from its log)."""
        if "failed to load all models" not in str(error):
            return error
        if not self._load_failures and not others:
            return type(error)(f"{error} (the core logged no reason where the package could read it: with "
                               "log_error=True its log names each model and why)")
        return type(error)(
            f"{error}:\n{_model_failures.describe(self._load_failures, others)}\nFix these models or take them "
            "out of the model repository; with Options(exit_on_error=False) the server starts with the models "
            "that load")

    def _refuse_never_ready(self) -> None:
        """Stop the server and raise UnavailableError when a model failed to
        load at start (UNAVAILABLE with a reason): the core does not retry
        it, so a server with strict readiness never becomes ready."""
        index = json.loads(self._started().model_index(0))
        failed = _model_failures.from_index(index)
        if not failed or not self.options.strict_readiness:
            return
        self.stop()
        again = {ModelControlMode.EXPLICIT: " (or start without waiting, and load each with server.load() once "
                                            "fixed)",
                 ModelControlMode.POLL: " (or start without waiting, and call server.poll_model_repository() "
                                        "once they are fixed)"}.get(self._control_mode, "")
        raise UnavailableError(
            "start(wait_until_ready=True): the server cannot become ready (strict_readiness: every model loaded "
            "must be ready) because models failed to load at start, and the core does not retry them:\n"
            f"{_model_failures.describe(_model_failures.merged(failed, self._load_failures))}\n"
            f"Fix them and start again{again}; with Options(strict_readiness=False) the server is ready without "
            "them. The server was stopped.")

    def stop(self) -> None:
        """Stop the server: in-flight requests finish (up to
        ``Options.exit_timeout``), models are unloaded.

        Raises InternalError ("Exit timeout expired") if requests outlive the
        exit timeout; the server then finishes stopping in the background:
        those requests complete and reach their waiters (the ones sent by
        in-process model code, BLS, are cancelled), the models unload, and
        the server is deleted (interpreter exit waits for this).

        A Ctrl-C while stop() waits raises KeyboardInterrupt at once, and the
        server finishes stopping in the background likewise. At the end of a
        ``with`` block left by a KeyboardInterrupt, and at interpreter exit,
        requests still in flight are said on stderr (how many, of which
        models, for how long at most), and a Ctrl-C ends the process at once
        instead (see the user guide, "Stopping and Ctrl-C").

        In a child process of ``fork()``, a server started by the parent is
        the parent's: stop() only forgets it there, and every other use
        raises UnavailableError.

        Host memory kept for reuse by output buffers already freed (up to
        256 MiB, shared by all servers of the process) is returned to the
        system here too; buffers still alive are not affected.

        Stopping a server already stopped does nothing (one never started
        raises InvalidArgumentError)."""
        self._stop(announced=False, interrupted=False)

    def _stop(self, announced: bool, interrupted: bool) -> None:
        """stop(), waiting as `_stopping.stop` says for `announced` and
        `interrupted`."""
        if self._server is None and self._stopped:
            return
        server = self._started()
        self._stopped = True  # first: a concurrent ready() then answers False
        _stopped_addresses.add(server.handle_address())
        self._server = None
        _running.discard(self)
        try:
            _stopping.stop(server, float(self.options.exit_timeout), announced, interrupted)
        finally:
            _native.host_pool_trim()
            _bind.release(self)

    def __enter__(self) -> "Server":
        """Start the server (unless started) for the ``with`` block."""
        if self._server is None:
            self.start()
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], *exc: Any) -> None:
        """Stop the server at the end of the ``with`` block (after a
        KeyboardInterrupt, as at interpreter exit: see stop())."""
        if self._server is not None:
            interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
            self._stop(announced=interrupted, interrupted=interrupted)

    def _started(self) -> _native.Server:
        """The native server; InvalidArgumentError when not started (or
        stopped)."""
        if self._server is None:
            if self._stopped_at_exit:
                _refuse_at_exit()
            if self._stopped:
                raise InvalidArgumentError("Server not started (it was stopped: call start() to use it again)")
            raise InvalidArgumentError("Server not started")
        return self._server

    @property
    def python_models(self) -> Optional[str]:
        """How this started server runs python-backend models: "in-process"
        or "stub" (None before start); see ``Options.python_models``."""
        return None if self._python_models is None else self._python_models.mode

    def _ptr(self) -> int:
        """Address of the underlying TRITONSERVER_Server (for tritonfrontend)."""
        return self._started().handle_address()

    # -- health and metadata -------------------------------------------------
    def ready(self) -> bool:
        """Whether the server is ready for inference (False once stopped;
        InvalidArgumentError if never started)."""
        if self._server is None and self._stopped:
            return False
        server = self._started()
        if not server.is_ready():
            return False
        # Under strict readiness a model being unloaded makes the server not
        # ready (as NVIDIA's binary): the core's own check sees it so once
        # its unload is asked for, and the package's drain comes first.
        return not (self.options.strict_readiness and any(
            entry.get("state") == "UNLOADING" for entry in self._index(0, draining_only=True)))

    def live(self) -> bool:
        """Whether the server is live (False once stopped;
        InvalidArgumentError if never started)."""
        if self._server is None and self._stopped:
            return False
        return self._started().is_live()

    def metadata(self) -> dict[str, Any]:
        """Server metadata: name (the server_id), version, extensions."""
        return _json_object(self._started().metadata())

    def metrics(self, metric_format: MetricFormat = MetricFormat.PROMETHEUS) -> str:
        """Metrics in Prometheus text format."""
        return self._started().metrics(int(metric_format))

    # -- models ----------------------------------------------------------------
    def models(self, exclude_not_ready: bool = False) -> ModelDictionary:
        """The model repository index, keyed by (name, version)."""
        flags = int(ModelIndexFlag.READY) if exclude_not_ready else 0
        entries = self._index(flags)
        models = []
        for entry in entries:
            version = int(entry["version"]) if entry.get("version") else -1
            models.append(Model(self, entry["name"], version, entry.get("state"), entry.get("reason")))
        return ModelDictionary(self, models)

    def _index(self, flags: int, draining_only: bool = False) -> list[dict[str, Any]]:
        """The core's model index, where a model being drained by an unload
        (its requests in flight waited for before the core is asked to
        unload it, cpp/model_unload.h) reads as the core says of it once
        asked: "UNLOADING", and not among the ready ones. `draining_only`:
        only the entries of those models (none, without reading the index,
        when there are none)."""
        server = self._started()
        draining = set(server.draining_models())
        if draining_only and not draining:
            return []
        entries: list[dict[str, Any]] = json.loads(server.model_index(flags))
        if draining_only:
            entries = [entry for entry in entries if entry.get("name") in draining]
        if not draining:
            return entries
        shown = []
        for entry in entries:
            if entry.get("name") in draining and entry.get("state") == "READY":
                if flags & int(ModelIndexFlag.READY):
                    continue
                entry = {key: value for key, value in entry.items() if key != "reason"}
                entry["state"] = "UNLOADING"
            shown.append(entry)
        return shown

    def model(self, model_name: str, model_version: int = -1) -> Model:
        """A handle on a model (not checked for existence)."""
        self._started()
        return Model(self, model_name, model_version)

    def load(self, model_name: str, parameters: Optional[dict[str, Any]] = None) -> Model:
        """Load (or reload) a model in EXPLICIT mode; blocks until done.

        ``parameters`` may hold ``"config"`` (a JSON string, or a dict that is
        serialized for you) and ``"file:<path>"`` entries with file contents
        (bytes), to load a model from memory.

        A model that is still unloading (an unload() whose requests in
        flight have not all finished) is waited for first, at most
        ``Options.exit_timeout`` seconds (UnavailableError past it): the
        Triton 2.51 core can crash when a model is loaded while the previous
        instance of the same model is being destroyed (see
        docs/hostile_inputs.md). The loads and unloads of other models do
        not wait meanwhile.
        """
        _text("load(): model_name", model_name)
        if parameters is not None and not isinstance(parameters, dict):
            raise TypeError(
                f"load({model_name!r}): parameters must be a dict (parameter name -> value, e.g. "
                f"{{'config': ...}}), not {type(parameters).__name__}"
            )
        params = {}
        for key, value in (parameters or {}).items():
            if key == "config" and isinstance(value, dict):
                value = json.dumps(value)
            _text("load(): parameter name", key)
            if isinstance(value, str):
                _text(f"load(): parameter {key!r}", value)
            params[key] = value
        # A Ctrl-C raises KeyboardInterrupt at once; the load goes on (and
        # keeps other loads and unloads waiting) until the core is done.
        refusal, logged = _interruptible.call(lambda: self._load_serialized(model_name, params),
                                              f"tritonserver-load-{model_name}")
        failures = [f for f in _model_failures.from_log(logged)[0] if f.model == model_name]
        self._load_failures = [f for f in self._load_failures if f.model != model_name] + failures
        if refusal is not None:
            try:
                _triton_core.explain_model_load_error(refusal)
                self._explain_missing_backend(refusal, model_name)
                self._explain_model_control_error(refusal, "load", model_name)
                self._explain_unknown_model_error(refusal, model_name, params)
                self._explain_unreadable_model(refusal, model_name, failures)
                raise refusal
            finally:
                refusal = None  # no cycle through this frame
        self._refuse_unusable_python_models([model_name])
        return self.model(model_name)

    def _load_serialized(self, model_name: str, params: dict[str, Any]) -> tuple[Optional[TritonError], list[str]]:
        """The core's load of a model, holding _model_control (one load or
        unload begins at a time), once the same model's unload is over: its
        refusal (or None) and the error lines the core logged meanwhile."""
        while True:
            # Waited for without the lock, so that other models' loads and
            # unloads go on meanwhile; checked again under it, where no
            # unload can begin.
            self._wait_while_unloading(model_name)
            with self._model_control:
                if self._unloading(model_name):
                    continue
                with _logging.core_errors() as logged:
                    try:
                        self._started().load_model(model_name, params)
                    except TritonError as e:
                        return e, logged
                return None, logged

    def _wait_while_unloading(self, model_name: str) -> None:
        """Wait until no version of `model_name` is UNLOADING (its model
        object destroyed), at most Options.exit_timeout seconds."""
        timeout = float(self.options.exit_timeout)
        deadline = time.monotonic() + timeout
        delay = 0.001
        while self._unloading(model_name):
            if time.monotonic() >= deadline:
                raise UnavailableError(
                    f"model '{model_name}' is still unloading after {timeout:g} s (Options.exit_timeout): its "
                    "requests in flight have not finished; load it again once they have (loading it while "
                    "the previous instance is destroyed can crash the Triton core)")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _unloading(self, model_name: str) -> bool:
        """Whether a version of `model_name` is UNLOADING: being drained, or
        its model object not destroyed yet."""
        return any(entry.get("name") == model_name and entry.get("state") == "UNLOADING"
                   for entry in self._index(0))

    def unload(
        self,
        model: Union[str, Model],
        unload_dependents: bool = False,
        wait_until_unloaded: bool = False,
        polling_interval: float = 0.1,
        timeout: Optional[float] = None,
    ) -> None:
        """Unload a model: its new requests are refused at once (it reads as
        UNLOADING, not ready), its requests in flight are let finish (at most
        ``Options.exit_timeout``), then the core unloads it; this returns
        then. A Ctrl-C meanwhile raises KeyboardInterrupt and leaves the
        unload to go on in the background (the drain is not cut short: the
        Triton 2.51 core can crash when a model is destroyed by the end of
        its last request). With ``wait_until_unloaded`` it then polls the
        index until every version is unloaded, raising UnavailableError
        after ``timeout`` seconds."""
        unloading = self._begin_unload(model, unload_dependents)
        if unloading is not None:
            while not unloading.wait(_stopping.SLICE_S):  # a Ctrl-C comes between slices
                pass
            unloading.finish()
        if not wait_until_unloaded:
            return
        name = model.name if isinstance(model, Model) else model
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            states = [m.state for key, m in self.models().items() if key[0] == name]
            if all(state in self._UNLOADED_STATES for state in states):
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise UnavailableError(f"Timeout before model '{name}' was unloaded")
            time.sleep(polling_interval)

    def _begin_unload(self, model: Union[str, Model], unload_dependents: bool) -> Optional[_native.UnloadInProgress]:
        """Begin unload(): the checks and refusals that come at once (a
        name not known, a server not in EXPLICIT mode), then the drain
        begun, the rest on a thread of its own (cpp/model_unload.h): what
        the frontends' unload waits for, as NVIDIA's binary. None when
        nothing is left to wait for."""
        server = self._started()
        name = model.name if isinstance(model, Model) else model
        if not isinstance(name, str):
            raise TypeError(f"unload() takes a model name (str) or a Model, not {type(model).__name__}")
        _text("unload(): model name", name)
        # The core accepts any name silently: a misspelt one would look
        # unloaded. Known: in the repository index, or loaded (a model
        # loaded from in-memory files is not in the index), or being
        # unloaded.
        if (not any(key[0] == name for key in self.models()) and not self._is_ready(name)
                and name not in server.draining_models()):
            raise NotFoundError(f"unload(): no model named {name!r} is in the model repository or loaded")
        # Held only while the unload begins (its drain marked): a load of
        # the same model then waits for it (load()), others go on.
        with self._model_control:
            try:
                if self._control_mode != ModelControlMode.EXPLICIT:
                    # The core refuses it at once (nothing to drain).
                    server.unload_model(name, unload_dependents)
                    return None
                return server.begin_unload(name, unload_dependents)
            except TritonError as e:
                self._explain_model_control_error(e, "unload", name)
                raise

    def _explain_model_control_error(self, error: TritonError, operation: str, name: str) -> None:
        """Raise a refusal of load()/unload() by a server not in EXPLICIT
        mode (the core's "not allowed if polling is enabled", said in NONE
        mode too) again, naming the model, the mode and the fix."""
        mode = self._control_mode
        if not isinstance(error, UnavailableError) or mode == ModelControlMode.EXPLICIT:
            return
        try:
            mode_name = ModelControlMode(mode).name
        except ValueError:
            mode_name = repr(mode)
        raise advised(
            UnavailableError,
            f"{operation}({name!r}) is refused: this server runs with model_control_mode={mode_name}, in which "
            "the core itself loads the repository's models (at start, and in POLL mode on "
            "poll_model_repository()); to load and unload models by name, create the server with "
            f"model_control_mode=ModelControlMode.EXPLICIT (the core said: {error})", error) from error

    def _explain_missing_backend(self, error: TritonError, name: str) -> None:
        """Raise the core's "unable to find backend library for backend 'X'"
        (Triton 2.39 and 2.41: "unable to find ... 'X/model.py' for model
        ...") again (same class), naming the model, the backend and where
        backends come from."""
        found = (re.search(r"unable to find backend library for backend '([^']*)'", str(error))
                 or re.search(r"unable to find [^;]*?'([^'/]+)/model\.py' for model", str(error)))
        if found is None:
            return
        backend = found.group(1)
        raise type(error)(
            f"load({name!r}): the model's backend {backend!r} is not in this server's backend folder "
            f"(Options.backend_directory={self.options.backend_directory!r}). The Triton core from PyPI "
            "(nvidia-pytriton) brings only the python backend; other backends come with an NGC container "
            f"(/opt/tritonserver/backends) or a build of that backend: put its folder ({backend}/libtriton_"
            f"{backend}.so, built for this Triton version) in a folder and name it with "
            f"Options.backend_directory (docs/cores.md) (the core said: {error})"
        ) from error

    def _explain_unreadable_model(self, error: TritonError, name: str,
                                  failures: list[_model_failures.Failure]) -> None:
        """Raise the core's "failed to poll from model repository" for a
        model whose config could not be read again (same class), with the
        core's reason from its log."""
        if "failed to poll" not in str(error) or not failures:
            return
        raise type(error)(
            f"load({name!r}): {'; '.join(str(f) for f in failures)}; fix it and load it again "
            f"(the core said: {error})") from error

    def _unknown_model(self, error: TritonError, name: str, version: int) -> TritonError:
        """The core's "unknown model" error for a request or a query about
        `name`, with the cause and what brings the model in this server's
        mode (see _model_failures.unknown_model)."""
        try:
            index = self._index(0)
        except TritonError:
            index = []
        bound = _bind.bound_folder(self)
        has_repository = bool(self.options.model_repository) or any(
            r != bound for r in self._registered_repositories)
        return _model_failures.unknown_model(error, name, version, self._control_mode, index,
                                             self._load_failures, has_repository)

    def _explain_unknown_model_error(self, error: TritonError, name: str, params: dict[str, Any]) -> None:
        """Raise the core's "failed to poll from model repository" for a
        name no repository holds as NotFoundError naming the model and the
        repositories searched."""
        if (not isinstance(error, InternalError) or "failed to poll" not in str(error)
                or any(key.startswith("file:") for key in params)
                or any(key[0] == name for key in self.models())):
            return
        given = self.options.model_repository
        repositories = [given] if isinstance(given, str) else list(given or [])
        repositories += self._registered_repositories
        guess = _model_failures.did_you_mean(name, json.loads(self._started().model_index(0)))
        raise advised(
            NotFoundError,
            f"load({name!r}): no model named {name!r} is in the model repository "
            f"({', '.join(repr(r) for r in repositories)}){guess}: check the name against server.models(), or add a "
            f"folder {name}/ (config.pbtxt and a version folder such as 1/) to a repository "
            f"(the core said: {error})", error) from error

    def bind(self, model_name: str, fn: Callable[..., Any], *, inputs: Sequence[TensorSpec],
             outputs: Sequence[TensorSpec], max_batch_size: int = 0, dynamic_batching: Optional[bool] = None,
             preferred_batch_sizes: Sequence[int] = (), max_queue_delay_us: int = 0, instances: int = 1,
             decoupled: Optional[bool] = None, config: Optional[Mapping[str, Any]] = None) -> Model:
        """Serve the Python callable `fn` as the model `model_name`, in this
        process (not an official API: PyTriton's ``bind`` without its
        subprocess). Needs ``model_control_mode=EXPLICIT``, which a server
        without a ``model_repository`` runs in (``Server()`` serves bound
        functions only); UnavailableError in another mode. Runs in-process
        whatever ``Options.python_models`` says; see the user guide,
        "Serving a Python function".

        `fn` is called with one keyword NumPy array per input (zero-copy
        views of the request's memory, read-only) and returns a dict of
        output arrays (NumPy, or any DLPack producer such as a torch CPU
        tensor). With ``max_batch_size > 0`` it is called once per batch that
        Triton's scheduler forms, the requests concatenated on axis 0, and its
        outputs are split back; ``dynamic_batching`` (default: on when
        batching) with ``preferred_batch_sizes`` and ``max_queue_delay_us``
        configures Triton's dynamic batcher. An ``async def`` `fn` runs on an
        event loop of the model instance's; a generator (or async generator)
        `fn` makes a decoupled model: each yielded dict is one response. A
        parameter named ``context`` receives a ``CallContext`` (request
        parameters, ids, ``cancelled()``); a batch is then split into calls
        of requests with equal parameters. An exception raised by `fn`
        becomes an error response of that call's requests (a TritonError
        subclass keeps its class); an output that is missing, undeclared, or
        of the wrong dtype or shape is an error response naming it.
        ``instances`` model instances serve calls concurrently (each on a
        core thread, taking the GIL while `fn` runs); ``config`` adds or
        overrides model-config fields. Binding a bound name again replaces
        the model. Returns the ready Model.
        """
        return _bind.bind(self, model_name, fn, inputs=inputs, outputs=outputs, max_batch_size=max_batch_size,
                          dynamic_batching=dynamic_batching, preferred_batch_sizes=preferred_batch_sizes,
                          max_queue_delay_us=max_queue_delay_us, instances=instances, decoupled=decoupled,
                          config=config)

    def unbind(self, model_name: str, timeout: Optional[float] = None) -> None:
        """Unload a model made by ``bind`` and wait until it is unloaded (its
        calls in flight finish first); its callable is then released."""
        _bind.check_bound(self, model_name)
        self.unload(model_name, wait_until_unloaded=True, polling_interval=0.01, timeout=timeout)
        _bind.forget(self, model_name)

    def _is_ready(self, name: str) -> bool:
        """Whether a model of this name is loaded and ready (False for an
        unknown name)."""
        try:
            return self._started().model_is_ready(name, -1)
        except (NotFoundError, InvalidArgumentError):
            return False

    def register_model_repository(
        self, repository_path: str, name_mapping: Optional[dict[str, str]] = None
    ) -> None:
        """Add a model repository; ``name_mapping`` maps a subfolder name to
        the model name to serve it under."""
        server = self._started()
        _text("register_model_repository(): repository_path", repository_path)
        mapping = list((name_mapping or {}).items())
        for directory, name in mapping:
            _text("register_model_repository(): name_mapping key", directory)
            _text(f"register_model_repository(): name_mapping[{directory!r}]", name)
        server.register_model_repository(repository_path, mapping)
        self._registered_repositories.append(repository_path)

    def unregister_model_repository(self, repository_path: str) -> None:
        """Remove a model repository."""
        server = self._started()
        server.unregister_model_repository(_text("unregister_model_repository(): repository_path", repository_path))
        if repository_path in self._registered_repositories:
            self._registered_repositories.remove(repository_path)

    def poll_model_repository(self) -> None:
        """Rescan the repositories now (POLL mode)."""
        self._started().poll_model_repository()
        self._refuse_unusable_python_models(None)

    def _refuse_unusable_python_models(self, names: Optional[list[str]]) -> None:
        """Where the python backend's stub cannot compute correctly (numpy 2
        in its environment, see _triton_core.stub_environment_report), a
        loaded python-backend model among `names` (None: every ready model)
        is unloaded again and UnsupportedError raised: such a model would
        return wrong numbers without an error."""
        server = self._started()
        if self._python_models is not None and self._python_models.in_process:
            return
        if names is None:
            names = sorted({m.name for m in self.models(exclude_not_ready=True).values()})
        refused = []
        for name in names:
            try:
                config = json.loads(server.model_config(name, -1, 1))
            except TritonError:  # not loaded (anymore)
                continue
            runtime = str(config.get("runtime", ""))
            if config.get("backend") == "python" or runtime.endswith(".py"):
                refused.append(name)
        # The probe of the stub's environment starts a python3: only when a
        # python-backend model is loaded.
        if not refused:
            return
        report = _triton_core.stub_environment_report()
        if report is None or report.problem is None:
            return
        for name in refused:
            try:
                server.unload_model(name, False)
            except TritonError:
                pass
        raise UnsupportedError(f"python-backend model(s) {', '.join(refused)} refused (unloaded): "
                               f"{report.problem}")


# Servers still running at interpreter exit are stopped while Python is fully
# alive (not during teardown, when the core's threads could outlive it).
_running: "weakref.WeakSet[Server]" = weakref.WeakSet()


# Core handle addresses of the servers stopped (or stopping), whose model
# code may still run: its BLS calls are refused as such.
_stopped_addresses: set[int] = set()


def stopped_server(address: int) -> bool:
    """Whether the core server at `address` was stopped (its stop may still
    be in progress), for the runtime of in-process python models."""
    return address in _stopped_addresses


def running_servers() -> list[tuple[int, Server]]:
    """(core handle address, server) of each running server, for the
    runtime of in-process python models (_python_models/_bls.py), which
    finds the server that a model's BLS or model-control call belongs to."""
    return [(s._ptr(), s) for s in list(_running) if s._server is not None]


def model_is_ready(server: Server, model_name: str, version: int) -> bool:
    """The core's readiness of `model_name` (`version`, -1: the core's
    choice) on a started server, its refusal raised as is (for _bls.py)."""
    return bool(server._started().model_is_ready(model_name, version))


def _after_fork_in_child() -> None:
    """A child process of fork() does not stop its parent's servers at exit,
    and ends without the core's exit handlers (the core's threads stayed in
    the parent; see cpp/fork.h)."""
    _running.clear()
    _native.end_child_at_exit()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _start_releaser() -> None:
    """The thread that drops the Python references Triton's threads park
    (inputs of finished requests) when the program does not call into the
    package for 20 ms; started by Python, so that Python makes its thread
    state with the GIL held (cpp/deferred_release.h). Once per process
    (again in a child of fork())."""
    global _releaser
    _releaser = _start_native_thread(_native.claim_releaser_start, _native.run_releaser, "tsb-releaser") or _releaser


_releaser: Optional[threading.Thread] = None


def _start_state_maker() -> None:
    """The thread that makes, holding the GIL, the Python thread states the
    core's threads keep to run python models and the log callback (none of
    them makes one without the GIL: cpp/thread_state.h). Once per process
    (again in a child of fork())."""
    global _state_maker
    _state_maker = _start_native_thread(_native.claim_state_maker_start, _native.run_state_maker,
                                        "tsb-states") or _state_maker


_state_maker: Optional[threading.Thread] = None


def _start_native_thread(claim: Callable[[], bool], body: Callable[[], None],
                         name: str) -> Optional[threading.Thread]:
    """A daemon thread running the native `body`, started when `claim()`
    says one is needed (None otherwise)."""
    if not claim():
        return None
    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread


def _stop_releaser() -> None:
    """At exit, after the servers stopped: the releaser ends and its thread
    is joined while the interpreter is whole (a daemon thread taking the GIL
    back during finalization would be killed mid-call)."""
    _native.stop_releaser()
    if _releaser is not None and _releaser.is_alive():
        _releaser.join(5.0)
    _native.stop_state_maker()
    if _state_maker is not None and _state_maker.is_alive():
        _state_maker.join(5.0)


@atexit.register
def _stop_running_servers() -> None:
    # The program ended with an unhandled KeyboardInterrupt (its traceback
    # printed): the user already pressed Ctrl-C once.
    interrupted = isinstance(getattr(sys, "last_value", None), KeyboardInterrupt)
    if _running:
        _quiet_at_exit()
    try:
        for server in list(_running):
            server._stopped_at_exit = True
            try:
                server._stop(announced=True, interrupted=interrupted)
            except Exception:  # exit must go on; the core already logged it
                pass
        # Servers whose stop hit the exit timeout finish stopping in the
        # background: wait for that, so that no thread is inside the core
        # while the process tears down.
        if _native.triton_loaded():
            _stopping.wait_for_background_stops(interrupted)
    except KeyboardInterrupt:  # between two waits: as during them
        _stopping.exit_now()
    finally:
        _stop_releaser()  # no thread of ours may take the GIL at finalization
        # The core's log goes back to stderr; the reader of its log pipe stops.
        _logging.stop_core_log_pipe(_reset_core_log)


class _StoppedAtExit(InvalidArgumentError):
    """A call on a server that the interpreter's exit stopped (see
    _refuse_at_exit)."""


def _refuse_at_exit() -> NoReturn:
    """Refuse a call on a server that the interpreter's exit stopped. A
    daemon thread still sending requests then ends without a traceback
    (_quiet_at_exit: the program's exit stays silent, as Python's daemon
    threads are left at exit); another exit handler is told why."""
    raise _StoppedAtExit("Server not started: the interpreter is exiting, and stopped it (servers still running at "
                         "exit are stopped before other exit handlers that were registered earlier run)")


def _quiet_at_exit() -> None:
    """From the exit hook on, a thread that ends on _StoppedAtExit is not
    reported (threading.excepthook); other exceptions are, as before."""
    previous = threading.excepthook

    def hook(args: "threading.ExceptHookArgs") -> None:
        if not isinstance(args.exc_value, _StoppedAtExit):
            previous(args)

    threading.excepthook = hook


def _reset_core_log() -> None:
    options = _native.ServerOptions()
    options.set_log_file("")
    options.set_log_error(_logging.errors_asked_for())
